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

check_live_timing "$TMP/stream" "$t0"

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
