#!/usr/bin/env bash
# Node.js with the ws package against /terminal_ws (terminal_ws.mjs), with the
# token as a subprotocol: echo, resize, Ctrl-C, and a resume after a dropped
# connection that gets every byte exactly once. Then docs/API.md's terminal
# example as written (doc_terminal.mjs), on Node's own WebSocket where it has
# one: dropped, kept down while the ring evicts, it resumes with the missed
# count for exactly what was evicted and every kept byte once.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

WS_VERSION=$(node -p 'require("'"$CLIENTS_DIR"'/node_modules/ws/package.json").version')
export WS_VERSION
timeout 25 node "$CLIENTS_DIR/terminal_ws.mjs"
# Node 22 has WebSocket; 20 with this flag; 18 not at all (the ws package then).
flags=()
node --experimental-websocket -e 0 2>/dev/null && flags=(--experimental-websocket)
timeout 30 node "${flags[@]}" "$CLIENTS_DIR/doc_terminal.mjs"
