#!/usr/bin/env bash
# examples/notebook.py drives a code context with Python requests
# (stream=True) as a notebook front-end does: state between cells, output
# before a sleep ends, an exception that leaves the context alive, a timeout
# that loses the state, and the 409 that says so.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 45 "$PY" "$EXAMPLES_DIR/notebook.py" >"$TMP/got" 2>&1 || { cat "$TMP/got" >&2; fail "notebook.py exited with $?"; }
cat >"$TMP/want" <<'WANT'
In [x = 41]
  complete: ok, state_lost=False, generation 1
In [x + 1]
  [result] 42
  complete: ok, state_lost=False, generation 1
In [import time]
  [stdout] 'thinking'
  complete: ok, state_lost=False, generation 1
In [1 / 0]
  [error] ZeroDivisionError: division by zero
  complete: error, state_lost=False, generation 1
In [x]
  [result] 41
  complete: ok, state_lost=False, generation 1
In [while True:]
  [error] ContextRestarted: the code did not stop within 2s of SIGINT; it was restarted and the context's state (variables, imports, functions) is lost
  complete: timeout, state_lost=True, generation 2
In [x]
  409 {'error': 'context was restarted', 'generation': 2}
WANT
same "$TMP/want" "$TMP/got"
echo "7 cells streamed, state kept then lost and said ($("$PY" -c 'import requests; print("requests", requests.__version__)'))"
