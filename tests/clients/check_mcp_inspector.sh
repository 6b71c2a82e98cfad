#!/usr/bin/env bash
# The MCP Inspector's CLI (@modelcontextprotocol/inspector-cli, run from its
# build/ directory, where it finds its own package.json) lists the tools
# of /mcp and calls one.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

cd "$CLIENTS_DIR/node_modules/@modelcontextprotocol/inspector-cli/build" || fail "the inspector CLI is not installed"
inspect() { timeout 40 node index.js "$SANDBOX_URL/mcp" --transport http --header "$AUTH" "$@"; }
inspect --method tools/list >"$TMP/list" || fail "tools/list: $(cat "$TMP/list")"
names=$("$PY" -c 'import json, sys; print(",".join(t["name"] for t in json.load(open(sys.argv[1]))["tools"]))' "$TMP/list")
[[ ",$names," == *",read_file,"* ]] || fail "read_file is not listed: $names"
inspect --method tools/call --tool-name preview_url --tool-arg port=8080 >"$TMP/call" || fail "tools/call: $(cat "$TMP/call")"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["structuredContent"] == {"path": "/proxy/8080/"}, r' "$TMP/call" ||
  fail "preview_url: $(cat "$TMP/call")"
echo "tools/list: $names; tools/call preview_url port=8080: /proxy/8080/"
