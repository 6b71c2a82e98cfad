#!/usr/bin/env bash
# curl -N on GET /process_logs_streaming for a process that prints a and
# then waits for the check (LIVE_CMD): curl must show a, and pings while
# the process is silent, before the process can go on to print b (see
# await_live); each event has its line number as id, and complete ends
# the stream when the process exits.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

GO=$TMP/go
body=$("$PY" -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1], "env": {"GO": sys.argv[2]}}))' "$LIVE_CMD" "$GO")
reply=$(curl -sS --max-time 10 --fail-with-body -X POST "$SANDBOX_URL/start_process" \
  -H "$AUTH" -H 'Content-Type: application/json' -d "$body") || fail "start_process: $reply"
id=$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$reply")

curl -sS -N --max-time 40 --fail-with-body "$SANDBOX_URL/process_logs_streaming?id=$id" -H "$AUTH" >"$TMP/stream" &
BG_PIDS+=($!)
await_live "$TMP/stream"
wait "${BG_PIDS[-1]}" || fail "curl failed"

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
echo "a arrived while the process still ran, with $n pings before it went on; then complete"
