#!/usr/bin/env bash
# curl's own proxy support as a tunnel client: curl -p -x (CONNECT through
# the agent, the token in Proxy-Authorization as Bearer, or as Basic's
# password with -U :TOKEN or http://x:TOKEN@host) reaches python3 -m
# http.server on a loopback port of the sandbox; a wrong token is 407.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/site"
echo "hello from the sandbox's http.server" >"$TMP/site/index.html"
port=$(free_port)
(cd "$TMP/site" && exec "$PY" -m http.server "$port" --bind 127.0.0.1) >"$TMP/http.log" 2>&1 &
BG_PIDS+=($!)
for _ in $(seq 100); do
  curl -fsS --max-time 1 "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
  sleep 0.1
done

proxy="http://${SANDBOX_URL#http://}"
got=$(curl -sS --max-time 10 -p -x "$proxy" --proxy-header "Proxy-Authorization: Bearer $SANDBOX_SECRET" \
  "http://127.0.0.1:$port/") || fail "curl through the tunnel failed: $got"
[ "$got" = "hello from the sandbox's http.server" ] || fail "through the tunnel: $got"

# What proxy clients send by themselves: Basic credentials with the token as
# the password, from -U :TOKEN and from the proxy URL's user info.
got=$(curl -sS --max-time 10 -p -x "$proxy" -U ":$SANDBOX_SECRET" "http://127.0.0.1:$port/") ||
  fail "curl -U :TOKEN -p through the tunnel failed: $got"
[ "$got" = "hello from the sandbox's http.server" ] || fail "through the tunnel with -U :TOKEN: $got"
got=$(curl -sS --max-time 10 -p -x "http://x:$SANDBOX_SECRET@${SANDBOX_URL#http://}" "http://127.0.0.1:$port/") ||
  fail "curl -x http://x:TOKEN@host -p through the tunnel failed: $got"
[ "$got" = "hello from the sandbox's http.server" ] || fail "through the tunnel with http://x:TOKEN@host: $got"

status=$( (curl -sv --max-time 10 -o /dev/null -p -x "$proxy" --proxy-header "Proxy-Authorization: Bearer wrong" \
  "http://127.0.0.1:$port/" 2>&1 || true) | sed -n 's/^< \(HTTP\/[0-9.]* [0-9]*\).*/\1/p' | head -n 1)
[ "$status" = "HTTP/1.1 407" ] || fail "a wrong token: CONNECT answered '$status', want HTTP/1.1 407"
echo "curl -p -x (Bearer, -U :TOKEN, x:TOKEN@) reached http.server on port $port; a wrong token got 407 ($(curl --version | head -n 1 | cut -d' ' -f1-2))"
