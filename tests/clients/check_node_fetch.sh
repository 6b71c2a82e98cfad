#!/usr/bin/env bash
# Node.js fetch and a stream reader: the document's code as written
# (doc_fetch.mjs) and examples/logs_fetch.mjs, both following one process
# whose pauses are longer than the keepalive: every line arrives, in order,
# with ": ping" comments between them (seen by a raw curl on the same stream).
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

id=$(start_process "$PING_CMD")
raw_stream "$id" "$TMP/raw"
timeout 30 node "$CLIENTS_DIR/doc_fetch.mjs" "$id" >"$TMP/doc" &
doc_pid=$!
timeout 30 node "$EXAMPLES_DIR/logs_fetch.mjs" "$id" >"$TMP/example" || fail "logs_fetch.mjs exited with $?"
wait "$doc_pid" || fail "doc_fetch.mjs exited with $?"
wait "${BG_PIDS[@]}" || true

printf '%s\n' "$PING_WANT" >"$TMP/want"
same "$TMP/want" "$TMP/doc"
same "$TMP/want" "$TMP/example"
n=$(pings "$TMP/raw")
((n >= 4)) || fail "only $n pings on the stream: the check did not exercise them"
echo "document's code and example: $(wc -l <"$TMP/doc") lines in order each, $n pings between them skipped (node $(node --version))"
