#!/usr/bin/env bash
# The official MCP TypeScript SDK's client (mcp_client.mjs): over its
# Streamable HTTP transport to /mcp, then over its stdio transport through
# `sandbox-executor mcp`. Each lists the tools (every input schema compiles
# as JSON Schema 2020-12), runs `echo hi` with exec and a command that
# yields with exec then exec_poll, writes a file and reads a line range of it,
# is refused an ambiguous edit_file (isError) then makes a unique one,
# applies a patch, resumes a cut grep by its cursor, finds files, answers a
# prompt with exec_poll's input, runs code, waits for a port, lists a
# directory, kills a background process, is refused an unknown tool, and
# reports a wrong token as a 401.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

for mode in http stdio; do
  id=$(start_process "sleep 60")
  out=$(cd "$CLIENTS_DIR" && timeout 40 node mcp_client.mjs "$mode" "$id") || fail "mcp_client.mjs $mode: $out"
  echo "$out"
done | tail -n 2 >"$TMP/out"
[ "$(wc -l <"$TMP/out")" -eq 2 ] || fail "$(cat "$TMP/out")"
echo "$(paste -sd ';' "$TMP/out") (sdk $(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1])).version' "$CLIENTS_DIR/node_modules/@modelcontextprotocol/sdk/package.json"))"
