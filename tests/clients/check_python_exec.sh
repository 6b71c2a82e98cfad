#!/usr/bin/env bash
# Python's websocket-client (Debian python3-websocket) speaking /exec_ws's
# channel protocol (exec_ws.py), with the token in the Authorization header
# and no subprotocol: every byte value through stdin and back, EOF on
# stdin, argv, a refused request, a TTY's size.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

timeout 40 "$PY" "$CLIENTS_DIR/exec_ws.py"
