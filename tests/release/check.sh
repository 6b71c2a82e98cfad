#!/usr/bin/env bash
# Checks what `make release` wrote: SHA256SUMS verifies with sha256sum -c and
# lists exactly the binaries; each binary is a static 64-bit little-endian
# ELF executable of its architecture (x86-64 for amd64, AArch64 for arm64:
# read from the ELF header, so no file(1) is needed), built by Go for linux
# with cgo off and -trimpath, holding the version; and the one this machine
# can run prints that version. Usage: tests/release/check.sh DIST VERSION
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 DIST VERSION" >&2; exit 2; }
DIST=$1 VERSION=$2
GO=${GO:-go}
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
pass() { echo "PASS $*"; }

cd "$DIST"
if out=$(sha256sum -c --strict SHA256SUMS 2>&1); then
  pass "sha256sum -c SHA256SUMS: $(echo "$out" | tr '\n' ' ')"
else
  fail "sha256sum -c SHA256SUMS: $out"
fi
listed=$(awk '{print $2}' SHA256SUMS | sed 's/^\*//' | sort | tr '\n' ' ')
present=$(printf '%s\n' sandbox-executor-* | sort | tr '\n' ' ')
[ "$listed" = "$present" ] || fail "SHA256SUMS lists '$listed', dist holds '$present'"

# u8 FILE OFFSET, u16 FILE OFFSET, u64 FILE OFFSET: little-endian integers.
u8() { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
u16() { od -An -tu2 -j "$2" -N2 --endian=little "$1" | tr -d ' '; }
u32() { od -An -tu4 -j "$2" -N4 --endian=little "$1" | tr -d ' '; }
u64() { od -An -tu8 -j "$2" -N8 --endian=little "$1" | tr -d ' '; }

# check_elf FILE MACHINE: a 64-bit LSB executable (ET_EXEC) for e_machine
# MACHINE with no PT_INTERP program header, i.e. no dynamic loader.
check_elf() {
  local f=$1 want=$2 i phoff phentsize phnum
  [ "$(od -An -c -N4 "$f" | tr -d ' ')" = '177ELF' ] || { echo "not an ELF file"; return 1; }
  [ "$(u8 "$f" 4)" = 2 ] || { echo "not 64-bit"; return 1; }
  [ "$(u8 "$f" 5)" = 1 ] || { echo "not little-endian"; return 1; }
  [ "$(u16 "$f" 16)" = 2 ] || { echo "not an executable (e_type $(u16 "$f" 16))"; return 1; }
  [ "$(u16 "$f" 18)" = "$want" ] || { echo "e_machine $(u16 "$f" 18), want $want"; return 1; }
  phoff=$(u64 "$f" 32) phentsize=$(u16 "$f" 54) phnum=$(u16 "$f" 56)
  for ((i = 0; i < phnum; i++)); do
    [ "$(u32 "$f" $((phoff + i * phentsize)))" != 3 ] || { echo "has a PT_INTERP: dynamically linked"; return 1; }
  done
}

for arch in amd64 arm64; do
  f=sandbox-executor-linux-$arch
  [ -f "$f" ] || { fail "$f is missing"; continue; }
  case $arch in amd64) machine=62 name=x86-64 ;; arm64) machine=183 name=AArch64 ;; esac
  if why=$(check_elf "$f" "$machine"); then
    pass "$f is a static ELF executable for $name"
  else
    fail "$f: $why"
  fi
  info=$("$GO" version -m "$f" 2>&1) || info="not a Go binary"
  ok=1
  for want in "GOOS=linux" "GOARCH=$arch" "CGO_ENABLED=0" "-trimpath=true"; do
    grep -qF -- "$want" <<<"$info" || { fail "$f: no $want in its build information"; ok=; }
  done
  # -trimpath leaves -ldflags out of the build information: look for the
  # version string itself.
  grep -qaF -- "$VERSION" "$f" || { fail "$f: the version $VERSION is not in it"; ok=; }
  [ -z "$ok" ] || pass "$f: GOOS=linux GOARCH=$arch, cgo off, -trimpath, holds $VERSION"
done

host=
case $(uname -m) in x86_64) host=amd64 ;; aarch64) host=arm64 ;; esac
if [ -n "$host" ]; then
  got=$("./sandbox-executor-linux-$host" -version 2>&1) || true
  if [ "$got" = "sandbox-executor $VERSION" ]; then
    pass "sandbox-executor-linux-$host -version: $got"
  else
    fail "sandbox-executor-linux-$host -version printed '$got', want 'sandbox-executor $VERSION'"
  fi
fi
((failed == 0)) || { echo "release check: $failed failed"; exit 1; }
