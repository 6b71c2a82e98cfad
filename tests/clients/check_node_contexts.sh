#!/usr/bin/env bash
# examples/notebook_fetch.mjs drives a JavaScript code context with Node's
# fetch: a let lasts between cells, console.log streams, a promise's value
# is the result, an uncaught error is an error event and the context lives on.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 30 node "$EXAMPLES_DIR/notebook_fetch.mjs" >"$TMP/got" 2>&1 || { cat "$TMP/got" >&2; fail "notebook_fetch.mjs exited with $?"; }
cat >"$TMP/want" <<'WANT'
In [let y = 2]
  complete: ok, generation 1
In [y * 21]
  [result] 42
  complete: ok, generation 1
In [console.log('waiting'); new Promise(r => setTimeout(() => r('done'), 500))]
  [stdout] "waiting\n"
  [result] 'done'
  complete: ok, generation 1
In [undefinedThing()]
  [error] ReferenceError: undefinedThing is not defined
  complete: error, generation 1
In [y]
  [result] 2
  complete: ok, generation 1
WANT
same "$TMP/want" "$TMP/got"
echo "5 cells with Node $(node --version) fetch, state kept between them"
