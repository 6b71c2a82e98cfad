# Helpers for the client checks, sourced by each check_*.sh. run.sh exports
# SANDBOX_URL and SANDBOX_SECRET (a running agent, -keepalive 200ms), BIN
# (the agent's binary, also its CLI), PY (a python3 that has requests and
# websocket-client), PYDEB (Debian's python3, with paramiko), CHROMIUM
# (Debian's chromium), CLIENTS_DIR (this folder, with node_modules) and
# EXAMPLES_DIR. A check prints one summary line and exits 0, or says
# why on stderr and exits non-zero. Every command in it is bounded in time.
#
# run.sh beside it and tests/image/run.sh source it with LIB_APT_ONLY=1,
# before any of that exists, for apt_install alone.
set -euo pipefail

# apt_install PACKAGE... installs the Debian packages with apt-get, running
# apt-get update before the first install, or, as a user other than root,
# says what to install and exits 1. Its messages start with $apt_who (the
# script's name if unset).
apt_updated=
apt_install() {
  local who=${apt_who:-${0##*/}}
  if [ "$(id -u)" -ne 0 ]; then
    echo "$who: missing $*; install it (Debian: apt-get install $*) or run as root" >&2
    exit 1
  fi
  echo "$who: installing $* with apt-get" >&2
  if [ -z "$apt_updated" ]; then
    timeout 300 apt-get update -qq >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends "$@" >&2
}
[ -z "${LIB_APT_ONLY:-}" ] || return 0

: "${SANDBOX_URL:?}" "${SANDBOX_SECRET:?}" "${PY:?}" "${CLIENTS_DIR:?}" "${EXAMPLES_DIR:?}" "${BIN:?}" "${PYDEB:?}"
AUTH="Authorization: Bearer $SANDBOX_SECRET"
TMP=$(mktemp -d)
BG_PIDS=()
cleanup() {
  local p
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

fail() { echo "FAIL: $*" >&2; exit 1; }

# now_us prints the time in microseconds since the epoch (for summaries).
now_us() { echo "${EPOCHREALTIME//[.,]/}"; }

# events FILE prints the event stream in FILE without comments and blank
# lines, with log timestamps replaced by T: the events as a list of lines.
events() {
  sed -e '/^:/d' -e '/^$/d' -e 's/"timestamp":"[^"]*"/"timestamp":T/' "$1"
}

# pings FILE prints how many ": ping" comments FILE holds.
pings() { grep -c '^: ping$' "$1" || true; }

# LIVE_CMD prints a, then waits (at most 30 s) for the file $GO before it
# prints b: the stream of a command that is still running. GO is a path
# in TMP; a check exports it before the command starts.
# shellcheck disable=SC2016 # expanded by the agent's shell
LIVE_CMD='echo a; i=0; while [ ! -e "$GO" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo b'

# await_live FILE: FILE receives the stream of LIVE_CMD. await_live waits,
# at most 20 s, until FILE shows a and then at least 3 pings (the agent's
# keepalive is 200ms), and only then creates $GO, which lets the command
# print b. So a stream that held a back, or sent no ping while the command
# was silent, fails here, whatever the machine's load: the command cannot
# end before the client has seen both. It sets n, the pings seen.
await_live() {
  local _
  for _ in $(seq 200); do
    n=$(sed -n '/"data":"a"/,$p' "$1" | grep -c '^: ping$' || true)
    if ((n >= 3)); then
      touch "$GO"
      return 0
    fi
    sleep 0.1
  done
  cat "$1" >&2
  fail "within 20 s, the stream did not show a and 3 pings while the command waited: it is held back"
}

# same WANT GOT: fails with a diff unless files WANT and GOT are equal.
same() { diff -u "$1" "$2" >&2 || fail "unexpected output (- want, + got)"; }

# json_cmd CMD prints the request body {"cmd": CMD}.
json_cmd() { "$PY" -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1]}))' "$1"; }

# start_process CMD starts CMD as a background process and prints its id.
start_process() {
  local reply
  reply=$(curl -sS --max-time 10 --fail-with-body -X POST "$SANDBOX_URL/start_process" \
    -H "$AUTH" -H 'Content-Type: application/json' -d "$(json_cmd "$1")") || fail "start_process: $reply"
  "$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$reply"
}

# raw_stream ID FILE captures the raw log stream of process ID into FILE in
# the background (the pid is in BG_PIDS).
raw_stream() {
  curl -sS -N --max-time 30 "$SANDBOX_URL/process_logs_streaming?id=$1" -H "$AUTH" >"$2" &
  BG_PIDS+=($!)
}

# PING_CMD prints lines with pauses longer than the agent's keepalive, so
# that ": ping" comments come between its events; PING_WANT is what a
# client prints for it. One line has non-ASCII text, quotes, a backslash
# and "data: " in it.
# shellcheck disable=SC2016,SC2034 # expanded by the agent's shell; used by the checks
PING_CMD='for i in 1 2 3 4; do echo "line $i"; sleep 0.5; done
printf "%s\n" "ünïcødé ✓ \"q\" \\ data: x"; sleep 0.5; echo "to stderr" >&2'
# shellcheck disable=SC2034 # used by the checks
PING_WANT='[stdout] line 1
[stdout] line 2
[stdout] line 3
[stdout] line 4
[stdout] ünïcødé ✓ "q" \ data: x
[stderr] to stderr'

# free_port prints a loopback port that was free a moment ago.
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_sshd starts OpenSSH's sshd in the foreground (-D -e) on a free
# loopback port, with a host key and an authorized client key generated in
# TMP and a configuration of its own (sftp for scp included), and sets
# SSH_PORT and SSH_ARGS (the client options that trust nothing else). Its
# pid goes to BG_PIDS, so the cleanup stops it. It needs root (sshd's
# privilege separation, /run/sshd).
start_sshd() {
  [ "$(id -u)" -eq 0 ] || fail "sshd needs root"
  mkdir -p /run/sshd
  chmod 0755 /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key" >/dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$TMP/id" >/dev/null
  cp "$TMP/id.pub" "$TMP/authorized_keys"
  SSH_PORT=$(free_port)
  cat >"$TMP/sshd_config" <<CONF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $TMP/host_key
PidFile none
AuthorizedKeysFile $TMP/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
CONF
  /usr/sbin/sshd -D -e -f "$TMP/sshd_config" 2>"$TMP/sshd.log" &
  BG_PIDS+=($!)
  local i
  for i in $(seq 100); do
    "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()' "$SSH_PORT" \
      2>/dev/null && break
    kill -0 "${BG_PIDS[-1]}" 2>/dev/null || { cat "$TMP/sshd.log" >&2; fail "sshd exited"; }
    sleep 0.1
  done
  SSH_ARGS=(-F /dev/null -i "$TMP/id" -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=10
    -o UserKnownHostsFile="$TMP/known_hosts" -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR)
}
