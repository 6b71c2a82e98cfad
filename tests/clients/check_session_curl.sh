#!/usr/bin/env bash
# examples/session.sh, the README's curl examples for sessions, runs as it is
# and answers what the README shows: the session's temp workdir, cd and export
# lasting from one /run to the next, the list, the delete and the 404 after.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 30 bash "$EXAMPLES_DIR/session.sh" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "session.sh failed"; }

section() { awk -v t="== $1" 'index($0, t) == 1 { on = 1; next } /^== / { on = 0 } on' "$TMP/out"; }
expect() { grep -qF -- "$2" <<<"$1" || { cat "$TMP/out" >&2; fail "no '$2' in: $1"; }; }
created=$(section 'create_session')
workdir=$(sed -n 's/.*"cwd":"\([^"]*\)".*/\1/p' <<<"$created")
[ -n "$workdir" ] || fail "no cwd in: $created"
expect "$created" '{"id":"thread-42","cwd":"'"$workdir"'","user":"'"$(id -un)"'"}'
expect "$(section 'run in it')" '{"stdout":"'"$workdir"'/app\ntest 1\n","stderr":"","code":0}'
expect "$(section 'list_sessions')" '{"sessions":[{"id":"thread-42","cwd":"'"$workdir"'/app","user":"'"$(id -un)"'","created_at":"'
deleted=$(section 'delete_session')
expect "$deleted" '{"success":true}'
expect "$deleted" '{"error":"session not found: thread-42"}'
[ ! -e "$workdir" ] || fail "the workdir $workdir outlived the session"
echo "all $(grep -c '^== ' "$TMP/out") steps answered as the README shows; the workdir is gone"
