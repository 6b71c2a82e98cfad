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
