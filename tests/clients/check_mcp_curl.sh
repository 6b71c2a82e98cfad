#!/usr/bin/env bash
# Raw JSON-RPC with curl, for each protocol version /mcp serves: for
# 2025-06-18 and 2025-11-25, initialize then tools/call; for 2026-07-28,
# server/discover then tools/call, with the _meta and the headers that
# version requires. Then an unsupported version (400, -32022), GET (405).
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

post() { # post BODY [HEADER...]: prints the reply, then its status on the last line
  local body=$1
  shift
  local h=(-H "$AUTH" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  for x in "$@"; do h+=(-H "$x"); done
  curl -sS --max-time 10 -w '\n%{http_code}' "${h[@]}" "$SANDBOX_URL/mcp" -d "$body"
}
field() { "$PY" -c 'import json, sys; v = json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v = v[k]
print(json.dumps(v))' "$1" "$2"; }
expect() { # expect REPLY STATUS FIELD WANT
  local body status
  status=$(tail -n 1 <<<"$1")
  body=$(sed '$d' <<<"$1")
  [ "$status" = "$2" ] || fail "status $status, want $2: $body"
  [ "$(field "$body" "$3")" = "$4" ] || fail "$3 is $(field "$body" "$3"), want $4: $body"
}
call='{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"preview_url","arguments":{"port":8000}}}'
for v in 2025-06-18 2025-11-25; do
  r=$(post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'$v'","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}')
  expect "$r" 200 result.protocolVersion "\"$v\""
  r=$(post "$call" "MCP-Protocol-Version: $v")
  expect "$r" 200 result.structuredContent.path '"/proxy/8000/"'
done
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}'
r=$(post '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{'"$meta"'}}' \
  "MCP-Protocol-Version: 2026-07-28" "Mcp-Method: server/discover")
expect "$r" 200 result.supportedVersions '["2026-07-28", "2025-11-25", "2025-06-18"]'
r=$(post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"preview_url","arguments":{"port":8000},'"$meta"'}}' \
  "MCP-Protocol-Version: 2026-07-28" "Mcp-Method: tools/call" "Mcp-Name: preview_url")
expect "$r" 200 result.structuredContent.path '"/proxy/8000/"'
r=$(post "$call" "MCP-Protocol-Version: 1999-01-01")
expect "$r" 400 error.code -32022
status=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "$AUTH" "$SANDBOX_URL/mcp")
[ "$status" = 405 ] || fail "GET /mcp is $status, want 405"
echo "2025-06-18 and 2025-11-25: initialize + tools/call; 2026-07-28: server/discover + tools/call; 1999-01-01: 400 -32022; GET: 405"
