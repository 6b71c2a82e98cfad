#!/usr/bin/env bash
# Real clients against the agent: curl -N, Python requests, Node.js fetch and
# the npm eventsource package (with an automatic reconnect), the ws package,
# Node's own WebSocket (docs/API.md's example) and Python's websocket-client
# on a terminal, headless Chromium running examples/terminal.html, and MCP
# clients (the TypeScript SDK, the Inspector CLI, curl) on /mcp, as a user
# would run them. Usage:
# tests/clients/run.sh BIN (make test-clients does this).
#
# On a fresh Debian machine it installs what is missing (as root, with
# apt-get: curl, wget, nodejs and npm, python3-requests, python3-websocket,
# chromium, openssh-server and -client, python3-paramiko; PyPI is not
# used; as another user it says what to install and fails), then `npm ci`
# here and in examples/ (node_modules stays in each, git-ignored). It
# starts BIN on free loopback ports with a random secret and -keepalive
# 200ms, runs each check_*.sh, prints one line per check and "N passed, M
# failed" last, and exits non-zero if any failed. The agent is stopped on exit.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BIN" >&2; exit 2; }
[ -x "$1" ] || { echo "run.sh: $1 is not an executable (make build)" >&2; exit 2; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CLIENTS_DIR=$(cd "$(dirname "$0")" && pwd)
EXAMPLES_DIR=$(cd "$CLIENTS_DIR/../../examples" && pwd)
export BIN CLIENTS_DIR EXAMPLES_DIR

# ---- what the clients need -------------------------------------------------

# shellcheck source-path=SCRIPTDIR source=lib.sh
LIB_APT_ONLY=1 . "$CLIENTS_DIR/lib.sh" # apt_install

command -v curl >/dev/null || apt_install curl ca-certificates
command -v wget >/dev/null || apt_install wget
command -v node >/dev/null || apt_install nodejs
command -v npm >/dev/null || apt_install npm
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  { echo "run.sh: Node.js 18 or later needed, found $(node --version)" >&2; exit 1; }

# A python3 that has requests and websocket-client: the one on PATH, else
# Debian's with python3-requests and python3-websocket (installed if
# missing: PyPI is out of reach).
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import requests, websocket' 2>/dev/null; then
    PY=$(command -v "$p")
    break
  fi
done
if [ -z "$PY" ]; then
  apt_install python3-requests python3-websocket
  PY=/usr/bin/python3
  "$PY" -c 'import requests, websocket'
fi
export PY

# A real terminal for exec -it: tmux.
command -v tmux >/dev/null || apt_install tmux
# ripgrep: the agent's /grep uses rg when it is on PATH (check_curl_grep.sh).
command -v rg >/dev/null || apt_install ripgrep

# A headless browser for examples/terminal.html: Debian's Chromium.
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  apt_install chromium
  CHROMIUM=$(command -v chromium)
fi
export CHROMIUM
# The tunnel checks: OpenSSH's server and client, and paramiko for the
# Debian python3 (PYDEB), which has Debian's packages.
[ -x /usr/sbin/sshd ] || apt_install openssh-server
command -v ssh >/dev/null && command -v scp >/dev/null && command -v ssh-keygen >/dev/null ||
  apt_install openssh-client
PYDEB=/usr/bin/python3
[ -x "$PYDEB" ] && "$PYDEB" -c 'import paramiko' 2>/dev/null || apt_install python3-paramiko
"$PYDEB" -c 'import paramiko'
export PYDEB

# npm ci here (the checks' packages) and in examples/ (the examples' own,
# xterm.js for terminal.html among them, as their README step says).
npm_log=$(mktemp)
for dir in "$CLIENTS_DIR" "$EXAMPLES_DIR"; do
  (cd "$dir" && timeout 300 npm ci --no-audit --no-fund >"$npm_log" 2>&1) ||
    { cat "$npm_log" >&2; echo "run.sh: npm ci in $dir failed" >&2; exit 1; }
done
rm -f "$npm_log"

# ---- the agent -------------------------------------------------------------

WORK=$(mktemp -d)
AGENT_PID=
stop_agent() {
  if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
    kill "$AGENT_PID" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$AGENT_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap stop_agent EXIT
trap 'exit 143' TERM INT

SANDBOX_SECRET=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
export SANDBOX_SECRET
# Port 0: the agent picks free ports and logs them. The secret goes by the
# environment, not a flag, so that no other process can read it.
env -u SANDBOX_AUTH_MODE -u BASE_PATH "$BIN" -addr 127.0.0.1:0 -proxy-addr 127.0.0.1:0 \
  -keepalive 200ms -log-level info 2>"$WORK/agent.log" &
AGENT_PID=$!

addr=
for _ in $(seq 100); do
  addr=$(sed -n 's/.*"api":"\([^"]*\)".*"message":"listening".*/\1/p' "$WORK/agent.log" | head -n 1)
  [ -n "$addr" ] && break
  kill -0 "$AGENT_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "run.sh: the agent did not report its address; its log:" >&2
  cat "$WORK/agent.log" >&2
  exit 1
fi
export SANDBOX_URL="http://$addr"
for _ in $(seq 50); do
  curl -fsS --max-time 1 "$SANDBOX_URL/health" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS --max-time 2 "$SANDBOX_URL/health" >/dev/null || { echo "run.sh: /health does not answer" >&2; exit 1; }

# ---- the checks ------------------------------------------------------------

checks=(
  "curl -N POST /run_streaming:check_curl_run_streaming.sh"
  "curl -N GET /process_logs_streaming:check_curl_process_logs.sh"
  "Python requests stream=True iter_lines (examples/logs.py):check_python_requests.sh"
  "Node fetch + reader (document's code, examples/logs_fetch.mjs):check_node_fetch.sh"
  "Node eventsource reconnect with Last-Event-ID (examples/logs_eventsource.mjs):check_node_eventsource.sh"
  "examples/curl.sh:check_example_curl.sh"
  "Node ws on /terminal_ws (token as a subprotocol); docs/API.md's terminal example resuming after eviction:check_node_terminal.sh"
  "Python websocket-client on /terminal_ws:check_python_terminal.sh"
  "headless Chromium, examples/terminal.html on xterm.js (typing, a resume after eviction, errors said):check_browser_terminal.sh"
  "Python requests driving a session (examples/session.py):check_python_session.sh"
  "README's curl examples for sessions (examples/session.sh):check_session_curl.sh"
  "curl -T/-F/-r/-z, wget -c, Python requests, tar on /files:check_files.sh"
  "curl -p -x CONNECT tunnel to python3 -m http.server:check_tunnel_curl.sh"
  "OpenSSH ssh and scp 10 MiB through sandbox-executor tunnel (CONNECT and -ws):check_tunnel_ssh.sh"
  "paramiko over a raw CONNECT socket, as SDKs do:check_tunnel_paramiko.sh"
  "preview proxy by path and by host: page, asset, SSE, Node ws echo:check_preview.sh"
  "curl /write_stdin --data-binary @file into sha256sum:check_curl_write_stdin.sh"
  "MCP TypeScript SDK over Streamable HTTP and over stdio through sandbox-executor mcp:check_mcp_ts_sdk.sh"
  "MCP Inspector CLI lists the tools and calls one:check_mcp_inspector.sh"
  "curl JSON-RPC to /mcp at 2025-06-18, 2025-11-25 and 2026-07-28:check_mcp_curl.sh"
  "Python websocket-client on /exec_ws (channels, no subprotocol):check_python_exec.sh"
  "sandbox-executor exec -it in a tmux pane (typing, resize, exit code, terminal restored):check_cli_exec_tmux.sh"
  "Python requests driving a code context as a notebook (examples/notebook.py):check_python_contexts.sh"
  "Node fetch driving a JavaScript code context (examples/notebook_fetch.mjs):check_node_contexts.sh"
  "curl -N /grep?stream=1 NDJSON, /edit_file with If-Match:check_curl_grep.sh"
)
passed=0
failed=0
for c in "${checks[@]}"; do
  name=${c%:*}
  script=${c##*:}
  start=${EPOCHREALTIME//[.,]/}
  if timeout -k 5 60 bash "$CLIENTS_DIR/$script" >"$WORK/out" 2>"$WORK/err"; then
    passed=$((passed + 1))
    ms=$(((${EPOCHREALTIME//[.,]/} - start) / 1000))
    printf 'PASS %s (%d.%ds): %s\n' "$name" $((ms / 1000)) $((ms % 1000 / 100)) "$(tail -n 1 "$WORK/out")"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
    sed 's/^/    /' "$WORK/out" "$WORK/err"
  fi
done
if ((failed > 0)); then
  echo "--- the agent's log (last 40 lines)"
  tail -n 40 "$WORK/agent.log"
fi
echo "$passed passed, $failed failed"
((failed == 0))
