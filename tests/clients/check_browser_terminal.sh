#!/usr/bin/env bash
# Headless Chromium (Debian's) opens examples/terminal.html from file://, as a
# user would after `npm ci` in examples/ (xterm.js from its node_modules, no
# CDN): it attaches to a terminal with xterm.js and the token as a WebSocket
# subprotocol, a command is typed into the page and its output read from the
# screen; then, through a relay that drops it while the ring evicts, it
# resumes with every kept byte once; a wrong secret and a missing xterm.js
# are said on its status line (browser_terminal.mjs). The screenshot is
# kept, git-ignored, in tests/clients/artifacts/.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
: "${CHROMIUM:?}"

reply=$(curl -sS --max-time 10 --fail-with-body -X POST "$SANDBOX_URL/start_terminal" \
  -H "$AUTH" -H 'Content-Type: application/json' -d '{"env":{"PS1":"$ "},"cols":100,"rows":30}') ||
  fail "start_terminal: $reply"
id=$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$reply")
shot="$CLIENTS_DIR/artifacts/terminal.png"
rm -f "$shot"
timeout 55 node "$CLIENTS_DIR/browser_terminal.mjs" "$id" "$shot"
[ -s "$shot" ] || fail "no screenshot at $shot"
curl -sS --max-time 10 -X POST "$SANDBOX_URL/kill_terminal" -H "$AUTH" -d "{\"id\":\"$id\"}" >/dev/null
