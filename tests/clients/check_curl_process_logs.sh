#!/usr/bin/env bash
# curl -N on GET /process_logs_streaming for a process running
# `echo a; sleep 2; echo b`: the first log event arrives within 1 s of the
# request, b about 2 s later, each event has its line number as id, and
# complete ends the stream when the process exits.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

id=$(start_process 'echo a; sleep 2; echo b')
t0=$(now_us)
curl -sS -N --max-time 20 --fail-with-body "$SANDBOX_URL/process_logs_streaming?id=$id" -H "$AUTH" |
  stamp >"$TMP/stream"

check_live_timing "$TMP/stream" "$t0"

cat >"$TMP/want" <<'W'
id: 1
event: log
data: {"timestamp":T,"stream":"stdout","data":"a"}
id: 2
event: log
data: {"timestamp":T,"stream":"stdout","data":"b"}
event: complete
data: {"message":"stream ended"}
W
events "$TMP/stream" >"$TMP/got"
same "$TMP/want" "$TMP/got"
echo "first line after $first_ms ms, second $gap_ms ms later, $n pings, then complete"
