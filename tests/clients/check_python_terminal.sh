#!/usr/bin/env bash
# Python's websocket-client (Debian python3-websocket) against /terminal_ws
# (terminal_ws.py), with the token in the Authorization header: echo, resize,
# Ctrl-C, a resume after a dropped connection that gets every byte exactly
# once, no subprotocol offered (accepted), a refused upgrade whose status
# line names sandbox-executor, and resumes after eviction that count every
# byte once, as missed or received.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 40 "$PY" "$CLIENTS_DIR/terminal_ws.py"
