#!/usr/bin/env bash
# The agent's API with plain curl: /run, /run_streaming, a background process
# and its log stream, /kill_process.
#
#   make run                                  # prints a development secret
#   SANDBOX_SECRET=<that secret> bash examples/curl.sh
#
# SANDBOX_URL defaults to http://127.0.0.1:3030, where `make run` listens.
# -N (--no-buffer) makes curl print each event the moment it arrives.
set -euo pipefail
URL=${SANDBOX_URL:-http://127.0.0.1:3030}
AUTH="Authorization: Bearer ${SANDBOX_SECRET:?set SANDBOX_SECRET to the secret that make run printed}"
JSON='Content-Type: application/json'

echo '== POST /run: runs a command to the end; one JSON reply (a non-zero exit is still HTTP 200)'
curl -sS --fail-with-body -X POST "$URL/run" -H "$AUTH" -H "$JSON" \
  -d '{"cmd": "echo hello; echo oops >&2; exit 3"}'

echo '== POST /run_streaming: one output event per line as it is printed, then complete'
curl -sS --fail-with-body -N -X POST "$URL/run_streaming" -H "$AUTH" -H "$JSON" \
  -d '{"cmd": "for i in 1 2 3; do echo $i; sleep 1; done"}'

echo '== POST /start_process: starts a background process; the reply holds its id'
REPLY=$(curl -sS --fail-with-body -X POST "$URL/start_process" -H "$AUTH" -H "$JSON" \
  -d '{"cmd": "for i in 1 2 3; do echo tick $i; sleep 1; done; echo finished >&2"}')
echo "$REPLY"
ID=$(printf '%s' "$REPLY" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')

echo "== GET /process_logs_streaming: the lines so far, then live ones, then complete when it exits"
# Each log event's id is its line number. Idle streams carry ": ping" comments.
curl -sS --fail-with-body -N "$URL/process_logs_streaming?id=$ID" -H "$AUTH"

echo '== the same, resumed after line 2 (what an EventSource sends when it reconnects), without following'
curl -sS --fail-with-body -N "$URL/process_logs_streaming?id=$ID&follow=false" -H "$AUTH" -H 'Last-Event-ID: 2'

echo '== POST /kill_process: stops a long-running process (SIGKILL to its process group)'
ID=$(curl -sS --fail-with-body -X POST "$URL/start_process" -H "$AUTH" -H "$JSON" \
  -d '{"cmd": "sleep 300"}' | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
curl -sS --fail-with-body -X POST "$URL/kill_process" -H "$AUTH" -H "$JSON" -d "{\"id\": \"$ID\"}"

echo '== GET /list_processes'
curl -sS --fail-with-body "$URL/list_processes" -H "$AUTH"
