#!/usr/bin/env bash
# curl -N on POST /run_streaming with `echo a; sleep 2; echo b`: the first
# output event arrives within 1 s of the request, b about 2 s later (so
# nothing was held back), idle time carries pings, and complete ends it.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

t0=$(now_us)
curl -sS -N --max-time 20 --fail-with-body -X POST "$SANDBOX_URL/run_streaming" \
  -H "$AUTH" -H 'Content-Type: application/json' -d '{"cmd": "echo a; sleep 2; echo b"}' |
  stamp >"$TMP/stream"

ta=$(first_at "$TMP/stream" '"data":"a"}')
tb=$(first_at "$TMP/stream" '"data":"b"}')
if [ -z "$ta" ] || [ -z "$tb" ]; then cat "$TMP/stream" >&2; fail "a or b missing"; fi
first_ms=$(((ta - t0) / 1000))
gap_ms=$(((tb - ta) / 1000))
((first_ms < 1000)) || fail "first line after $first_ms ms, want < 1000 ms"
((gap_ms >= 1500)) || fail "b only $gap_ms ms after a: the lines were not delivered as produced"
n=$(pings "$TMP/stream")
((n >= 3)) || fail "$n pings during 2 s of silence with -keepalive 200ms, want >= 3"

cat >"$TMP/want" <<'W'
event: output
data: {"stream":"stdout","data":"a"}
event: output
data: {"stream":"stdout","data":"b"}
event: complete
data: {"code":0,"error":false}
W
events "$TMP/stream" >"$TMP/got"
same "$TMP/want" "$TMP/got"
echo "first line after $first_ms ms, second $gap_ms ms later, $n pings, then complete"
