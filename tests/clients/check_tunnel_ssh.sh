#!/usr/bin/env bash
# OpenSSH through the agent: sshd on a loopback port of the sandbox,
# reached by ssh with "sandbox-executor tunnel" as its ProxyCommand, over
# CONNECT and over a WebSocket (-ws): echo ok runs, and scp moves 10 MiB
# there and back intact.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

start_sshd
head -c 10485760 /dev/urandom >"$TMP/big"
want=$(sha256sum <"$TMP/big" | cut -d' ' -f1)
summary=
for mode in connect ws; do
  flag=
  [ "$mode" = ws ] && flag=-ws
  proxy="$BIN tunnel -url $SANDBOX_URL -port %p $flag"
  out=$(timeout 20 ssh "${SSH_ARGS[@]}" -o ProxyCommand="$proxy" -p "$SSH_PORT" root@127.0.0.1 echo ok 2>"$TMP/ssh.err") ||
    { cat "$TMP/ssh.err" "$TMP/sshd.log" >&2; fail "$mode: ssh failed"; }
  [ "$out" = ok ] || fail "$mode: ssh printed $out"
  rm -f "$TMP/big.$mode" "$TMP/back.$mode"
  start=$(now_us)
  timeout 30 scp "${SSH_ARGS[@]}" -o ProxyCommand="$proxy" -P "$SSH_PORT" "$TMP/big" "root@127.0.0.1:$TMP/big.$mode" 2>"$TMP/scp.err" ||
    { cat "$TMP/scp.err" >&2; fail "$mode: scp there failed"; }
  timeout 30 scp "${SSH_ARGS[@]}" -o ProxyCommand="$proxy" -P "$SSH_PORT" "root@127.0.0.1:$TMP/big.$mode" "$TMP/back.$mode" 2>"$TMP/scp.err" ||
    { cat "$TMP/scp.err" >&2; fail "$mode: scp back failed"; }
  ms=$((($(now_us) - start) / 1000))
  for f in "$TMP/big.$mode" "$TMP/back.$mode"; do
    [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$want" ] || fail "$mode: $f differs from what was sent"
  done
  summary+="$mode: echo ok, 10 MiB there and back intact in $ms ms; "
done
echo "${summary}$(ssh -V 2>&1 | cut -d, -f1)"
