#!/usr/bin/env bash
# examples/curl.sh runs as it is against the agent and shows what its
# comments promise: /run's reply, streamed output, a process's log stream
# with ids, the resumed stream starting after line 2, and the kill.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 30 bash "$EXAMPLES_DIR/curl.sh" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "curl.sh failed"; }

# section TITLE_START prints the lines of the section whose title starts so.
section() { awk -v t="== $1" 'index($0, t) == 1 { on = 1; next } /^== / { on = 0 } on' "$TMP/out"; }
expect() { grep -qF -- "$2" <<<"$1" || { cat "$TMP/out" >&2; fail "no '$2' in: $1"; }; }
expect "$(section 'POST /run:')" '{"stdout":"hello\n","stderr":"oops\n","error":"Non-zero exit code","code":3}'
run=$(section 'POST /run_streaming' | grep -v '^: ping$' | grep -v '^$')
expect "$run" 'data: {"stream":"stdout","data":"3"}'
expect "$run" 'data: {"code":0,"error":false}'
logs=$(section 'GET /process_logs_streaming')
expect "$logs" '"stream":"stdout","data":"tick 1"}'
expect "$logs" '"stream":"stderr","data":"finished"}'
expect "$logs" 'data: {"message":"stream ended"}'
resumed=$(section 'the same, resumed')
[ "$(grep '^id: ' <<<"$resumed" | tr '\n' ' ')" = 'id: 3 id: 4 ' ] || fail "resumed after line 2: $resumed"
expect "$(section 'POST /kill_process')" '"success":true'
echo "all its requests answered as shown ($(grep -c '^== ' "$TMP/out") steps)"
