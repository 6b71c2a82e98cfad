#!/usr/bin/env bash
# Node.js with the ws package against /terminal_ws (terminal_ws.mjs), with the
# token as a subprotocol: echo, resize, Ctrl-C, and a resume after a dropped
# connection that gets every byte exactly once.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

WS_VERSION=$(node -p 'require("'"$CLIENTS_DIR"'/node_modules/ws/package.json").version')
export WS_VERSION
timeout 40 node "$CLIENTS_DIR/terminal_ws.mjs"
