#!/usr/bin/env bash
# curl -N on POST /run_streaming. With keepalive asked for, a command that
# prints a and then waits for the check (LIVE_CMD): curl must show a, and
# pings while the command is silent, before the command can go on to print
# b (see await_live), and complete ends the stream. Without keepalive, a
# silent stretch carries no ping, so that a client's own "no bytes for N
# seconds" timeout still works.
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

GO=$TMP/go
body=$("$PY" -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1], "env": {"GO": sys.argv[2]}, "keepalive": True}))' "$LIVE_CMD" "$GO")
curl -sS -N --max-time 40 --fail-with-body -X POST "$SANDBOX_URL/run_streaming" \
  -H "$AUTH" -H 'Content-Type: application/json' -d "$body" >"$TMP/stream" &
BG_PIDS+=($!)
await_live "$TMP/stream"
wait "${BG_PIDS[-1]}" || fail "curl failed"
events "$TMP/stream" >"$TMP/got"
same "$TMP/want" "$TMP/got"

curl -sS -N --max-time 20 --fail-with-body -X POST "$SANDBOX_URL/run_streaming" \
  -H "$AUTH" -H 'Content-Type: application/json' -d '{"cmd": "echo a; sleep 1; echo b"}' >"$TMP/quiet"
quiet=$(pings "$TMP/quiet")
((quiet == 0)) || fail "$quiet pings without keepalive, want none"
events "$TMP/quiet" >"$TMP/got"
same "$TMP/want" "$TMP/got"
echo "a arrived while the command still ran, with $n pings before it went on; none without keepalive; then complete"
