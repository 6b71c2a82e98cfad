#!/usr/bin/env bash
# curl -N on POST /run_streaming with `echo a; sleep 2; echo b`: the first
# output event arrives within 1 s of the request, b about 2 s later (so
# nothing was held back), and complete ends it. Asked for keepalive, the
# idle time carries pings; not asked, it carries none, so that a client's
# own "no bytes for N seconds" timeout still works.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

cat >"$TMP/want" <<'W'
event: output
data: {"stream":"stdout","data":"a"}
event: output
data: {"stream":"stdout","data":"b"}
event: complete
data: {"code":0,"error":false}
W

t0=$(now_us)
curl -sS -N --max-time 20 --fail-with-body -X POST "$SANDBOX_URL/run_streaming" \
  -H "$AUTH" -H 'Content-Type: application/json' -d '{"cmd": "echo a; sleep 2; echo b", "keepalive": true}' |
  stamp >"$TMP/stream"
check_live_timing "$TMP/stream" "$t0"
events "$TMP/stream" >"$TMP/got"
same "$TMP/want" "$TMP/got"

curl -sS -N --max-time 20 --fail-with-body -X POST "$SANDBOX_URL/run_streaming" \
  -H "$AUTH" -H 'Content-Type: application/json' -d '{"cmd": "echo a; sleep 1; echo b"}' >"$TMP/quiet"
quiet=$(pings "$TMP/quiet")
((quiet == 0)) || fail "$quiet pings without keepalive, want none"
events "$TMP/quiet" >"$TMP/got"
same "$TMP/want" "$TMP/got"
echo "first line after $first_ms ms, second $gap_ms ms later, $n pings with keepalive, none without, then complete"
