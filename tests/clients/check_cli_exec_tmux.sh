#!/usr/bin/env bash
# sandbox-executor exec -it driven by a real terminal: tmux runs it in a
# pane, types into it, resizes the pane and reads the screen. The remote
# shell computes echo $((6*7)); stty size follows the pane's new size;
# exit 4 makes exec exit 4; and the local terminal's settings afterwards
# are those from before (raw mode undone).
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || apt_install tmux
SOCK=$TMP/tmux.sock
tm() { timeout 10 tmux -S "$SOCK" "$@"; }
trap 'tm kill-server 2>/dev/null || true; cleanup' EXIT

# The pane's program: the settings before, exec -it of sh (PS1 "$ ", no rc
# file), the exit code, the settings after; then it waits to be read.
cat >"$TMP/pane.sh" <<PANE
stty -g >"$TMP/before"
"$BIN" exec -it -env PS1='$ ' -env ENV= -- sh
echo "exit=\$?"
stty -g >"$TMP/after"
sleep 60
PANE
tm -f /dev/null new-session -d -s exec -x 100 -y 30 \
  env SANDBOX_URL="$SANDBOX_URL" SANDBOX_SECRET="$SANDBOX_SECRET" HOME="$TMP" sh "$TMP/pane.sh"
tm set-option -g window-size manual >/dev/null

# screen_has TEXT waits (at most 15 s) until the pane shows a line TEXT.
screen_has() {
  for _ in $(seq 150); do
    tm capture-pane -p -t exec | grep -qxF -- "$1" && return 0
    sleep 0.1
  done
  echo "--- the pane:" >&2
  tm capture-pane -p -t exec >&2
  fail "the pane never showed the line '$1'"
}

screen_has '$'
tm send-keys -t exec 'echo $((6*7))' Enter
screen_has '42'
tm resize-window -t exec -x 120 -y 40
# SIGWINCH reaches exec, which sends the size on; asked until it shows (a
# stty that ran before it arrived says 30 100).
for _ in $(seq 20); do
  tm send-keys -t exec 'stty size' Enter
  sleep 0.2
  tm capture-pane -p -t exec | grep -qxF '40 120' && break
done
screen_has '40 120'
tm send-keys -t exec 'exit 4' Enter
screen_has 'exit=4'
for _ in $(seq 50); do [ -s "$TMP/after" ] && break; sleep 0.1; done
[ "$(cat "$TMP/before")" = "$(cat "$TMP/after")" ] ||
  fail "the terminal was not restored: before $(cat "$TMP/before"), after $(cat "$TMP/after")"
echo "42 typed and computed, resize followed (40 120), exit 4, terminal restored"
