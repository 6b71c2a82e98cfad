#!/usr/bin/env bash
# Python's websocket-client (Debian python3-websocket) against /terminal_ws
# (terminal_ws.py), with the token in the Authorization header: echo, resize,
# Ctrl-C, and a resume after a dropped connection that gets every byte
# exactly once.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 40 "$PY" "$CLIENTS_DIR/terminal_ws.py"
