#!/usr/bin/env bash
# The preview proxy with real clients: a Node app (preview_app.mjs) behind
# /proxy/PORT/ and behind the host name PORT-preview.localhost (a public
# exposed port), driven by Node's http and the npm ws package
# (preview_client.mjs): page and absolute-URL asset, the app's 404, an event
# stream whose first event arrives before it ends, a WebSocket echo.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

node "$CLIENTS_DIR/preview_app.mjs" >"$TMP/app.port" 2>"$TMP/app.err" &
BG_PIDS+=($!)
for _ in $(seq 100); do
  [ -s "$TMP/app.port" ] && break
  sleep 0.1
done
port=$(head -n 1 "$TMP/app.port")
[ -n "$port" ] || { cat "$TMP/app.err" >&2; fail "the app did not start"; }

reply=$(curl -sS --max-time 10 --fail-with-body -H "$AUTH" "$SANDBOX_URL/expose_port" \
  -d "{\"port\": $port, \"public\": true}") || fail "expose_port: $reply"
timeout 30 node "$CLIENTS_DIR/preview_client.mjs" "$SANDBOX_URL" "$SANDBOX_SECRET" "$port" >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/out" "$TMP/err" >&2; fail "preview_client.mjs failed"; }
curl -sS --max-time 10 -H "$AUTH" "$SANDBOX_URL/unexpose_port" -d "{\"port\": $port}" >/dev/null
echo "$(cat "$TMP/out") (node $(node --version))"
