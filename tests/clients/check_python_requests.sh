#!/usr/bin/env bash
# Python requests with stream=True and iter_lines(), the document's example
# (examples/logs.py), following a process whose pauses are longer than the
# keepalive: every line arrives, in order, with ": ping" comments between
# them (seen by a raw curl on the same stream).
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

id=$(start_process "$PING_CMD")
raw_stream "$id" "$TMP/raw"
timeout 30 "$PY" "$EXAMPLES_DIR/logs.py" "$id" >"$TMP/got" || fail "logs.py exited with $?"
wait "${BG_PIDS[@]}" || true

printf '%s\n' "$PING_WANT" >"$TMP/want"
same "$TMP/want" "$TMP/got"
n=$(pings "$TMP/raw")
((n >= 4)) || fail "only $n pings on the stream: the check did not exercise them"
echo "$(wc -l <"$TMP/got") lines in order, $n pings between them skipped ($("$PY" -c 'import requests; print("requests", requests.__version__)'))"
