#!/usr/bin/env bash
# examples/session.py drives a session with Python requests as a coding agent
# does (cd, source .venv/bin/activate and the tests as separate calls, one of
# them streamed), and every step sees what the one before left.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 30 "$PY" "$EXAMPLES_DIR/session.py" py-check >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "session.py exited with $?"; }
workdir=$(sed -n 's/^session py-check in \(.*\) as .*/\1/p' "$TMP/out")
[ -n "$workdir" ] || { cat "$TMP/out" >&2; fail "no session line"; }
sed "s#$workdir#WORKDIR#g" "$TMP/out" | grep -v '^\$ mkdir' >"$TMP/got"
cat >"$TMP/want" <<WANT
session py-check in WORKDIR as $(id -un)
\$ pwd  -> code 0
  WORKDIR/app
\$ source .venv/bin/activate  -> code 0
\$ echo "\$VIRTUAL_ENV"; command -v run-tests  -> code 0
  WORKDIR/app/.venv
  WORKDIR/app/.venv/bin/run-tests
  [stdout] tests passed in WORKDIR/app with WORKDIR/app/.venv
  [stderr] done
  complete: code 0
sessions: py-check (cwd WORKDIR/app, 0 running)
after delete_session: 404 session not found: py-check
WANT
same "$TMP/want" "$TMP/got"
[ ! -e "$workdir" ] || fail "the workdir $workdir outlived the session"
echo "$(grep -c '^\$ ' "$TMP/out") calls and a stream in one session, each seeing the last; workdir removed ($("$PY" -c 'import requests; print("requests", requests.__version__)'))"
