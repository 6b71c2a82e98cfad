#!/usr/bin/env bash
# The streaming file endpoint /files with the tools people use: curl -T
# (PUT), curl -F (several files), curl -r (a range, 206), curl -z and
# If-None-Match (304), wget -c resuming a cut download, Python requests
# uploading a generator (chunked) and downloading with iter_content, tar -x
# of a downloaded tar.gz compared with diff -r; and an archive cut by a file
# that shrinks as it is read, which curl (exit 18), requests
# (ChunkedEncodingError) and tar each report. The agent runs on this
# machine, so its files are checked here directly.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

F="$SANDBOX_URL/files"
R="$TMP/remote" # what the agent writes
mkdir -p "$R"
head -c 3000000 /dev/urandom >"$TMP/src.bin"

# code_of CURL_ARGS... runs curl and prints the status; the body goes to $TMP/body.
code_of() { curl -sS --max-time 20 -H "$AUTH" -o "$TMP/body" -w '%{http_code}' "$@"; }
want() { [ "$1" = "$2" ] || { cat "$TMP/body" >&2 2>/dev/null; fail "$3: got $2, want $1"; }; }

# curl -T: PUT, parents created; again: replaced.
want 201 "$(code_of -T "$TMP/src.bin" "$F?path=$R/up/src.bin")" "curl -T"
grep -q "\"size\":3000000" "$TMP/body" || fail "curl -T reply: $(cat "$TMP/body")"
cmp -s "$TMP/src.bin" "$R/up/src.bin" || fail "curl -T changed the bytes"
want 200 "$(code_of -T "$TMP/src.bin" "$F?path=$R/up/src.bin")" "curl -T again"

# curl -F: several files, each under its base name.
printf 'first' >"$TMP/a.txt"
printf 'second' >"$TMP/b.txt"
want 200 "$(code_of -F "file=@$TMP/a.txt" -F "file=@$TMP/b.txt;filename=../../escaped.txt" "$F?path=$R/form")" "curl -F"
[ "$(cat "$R/form/a.txt")$(cat "$R/form/escaped.txt")" = firstsecond ] || fail "curl -F: $(cat "$TMP/body")"
[ ! -e "$TMP/escaped.txt" ] && [ ! -e "$R/escaped.txt" ] || fail "a part escaped the directory"

# curl -r 100-199: 206 with exactly those bytes.
want 206 "$(code_of -r 100-199 "$F?path=$R/up/src.bin")" "curl -r"
dd if="$TMP/src.bin" bs=100 skip=1 count=1 status=none >"$TMP/want.range"
cmp -s "$TMP/want.range" "$TMP/body" || fail "curl -r 100-199: other bytes"

# curl -z (If-Modified-Since from a file of the same time) and If-None-Match: 304.
touch -r "$R/up/src.bin" "$TMP/stamp"
want 304 "$(code_of -z "$TMP/stamp" "$F?path=$R/up/src.bin")" "curl -z"
etag=$(curl -sS --max-time 10 -I -H "$AUTH" "$F?path=$R/up/src.bin" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
[ -n "$etag" ] || fail "no ETag"
want 304 "$(code_of -H "If-None-Match: $etag" "$F?path=$R/up/src.bin")" "If-None-Match"
want 200 "$(code_of -H 'If-None-Match: "other"' "$F?path=$R/up/src.bin")" "If-None-Match of another ETag"

# wget -c: a download cut short (killed), then resumed.
timeout -s KILL 1 wget -q --limit-rate=500k --header "$AUTH" -O "$TMP/w.bin" "$F?path=$R/up/src.bin" || true
part=$(stat -c %s "$TMP/w.bin")
((part > 0 && part < 3000000)) || fail "the first wget got $part bytes: nothing to resume"
timeout 20 wget -q -c --header "$AUTH" -O "$TMP/w.bin" "$F?path=$R/up/src.bin" || fail "wget -c failed"
cmp -s "$TMP/src.bin" "$TMP/w.bin" || fail "wget -c: the resumed file differs"

# Python requests: a generator body goes chunked; iter_content downloads.
timeout 30 "$PY" - "$F" "$R/py.bin" <<'EOF' || fail "Python requests"
import hashlib, os, sys, requests
url, path = sys.argv[1], sys.argv[2]
headers = {"Authorization": "Bearer " + os.environ["SANDBOX_SECRET"]}
sent = hashlib.sha256()
def chunks():
    for i in range(64):
        b = os.urandom(65536)
        sent.update(b)
        yield b
r = requests.put(url, params={"path": path}, data=chunks(), headers=headers, timeout=20)
assert r.status_code == 201, (r.status_code, r.text)
assert r.json() == {"path": path, "size": 64 * 65536}, r.text
got = hashlib.sha256()
with requests.get(url, params={"path": path}, headers=headers, stream=True, timeout=20) as r:
    r.raise_for_status()
    for b in r.iter_content(chunk_size=100_000):
        got.update(b)
assert got.digest() == sent.digest(), "iter_content got other bytes"
EOF

# tar -x of a downloaded tar.gz is the tree, links and modes included.
mkdir -p "$R/tree/a/b" "$R/tree/empty" "$TMP/x"
printf 'nested\n' >"$R/tree/a/b/f.txt"
printf '#!/bin/sh\n' >"$R/tree/run.sh"
chmod 755 "$R/tree/run.sh"
ln -s a/b/f.txt "$R/tree/link"
want 200 "$(code_of "$F?path=$R/tree&format=tar.gz")" "GET format=tar.gz"
tar -xzf "$TMP/body" -C "$TMP/x" || fail "tar -x of the download"
diff -r --no-dereference "$R/tree" "$TMP/x" >&2 || fail "the unpacked tree differs"

# An archive cut by a file that shrinks while it is read: each client sees it.
mkdir -p "$R/cut"
head -c 33554432 /dev/urandom >"$TMP/big" # random: the agent cannot run ahead of a stalled reader
cp "$TMP/big" "$R/cut/big"
set +o pipefail
curl -sS --max-time 20 -H "$AUTH" "$F?path=$R/cut&format=tar" 2>"$TMP/curl.err" |
  { dd bs=65536 count=1 iflag=fullblock status=none >"$TMP/cut.tar"; truncate -s 0 "$R/cut/big"; cat >>"$TMP/cut.tar"; }
rc=${PIPESTATUS[0]}
set -o pipefail
((rc == 18)) || fail "curl exited with $rc, want 18 (partial file): $(cat "$TMP/curl.err")"
if tar -tf "$TMP/cut.tar" >/dev/null 2>"$TMP/tar.err"; then fail "tar took the cut archive for whole"; fi
grep -qa "sandbox-executor: archive incomplete: " "$TMP/cut.tar" || fail "no reason in the cut archive"
cp "$TMP/big" "$R/cut/big"
timeout 30 "$PY" - "$F" "$R/cut" <<'EOF' || fail "Python requests did not see the cut"
import os, sys, requests
url, path = sys.argv[1], sys.argv[2]
headers = {"Authorization": "Bearer " + os.environ["SANDBOX_SECRET"]}
with requests.get(url, params={"path": path, "format": "tar"}, headers=headers, stream=True, timeout=20) as r:
    it = r.iter_content(chunk_size=65536)
    next(it)
    os.truncate(os.path.join(path, "big"), 0)
    try:
        for _ in it:
            pass
    except requests.exceptions.ChunkedEncodingError:
        sys.exit(0)
sys.exit("the cut archive was read as whole")
EOF

echo "curl -T/-F/-r/-z/If-None-Match, wget -c, requests generator + iter_content, tar.gz | tar -x = diff -r, cut archive: curl 18, $(head -n 1 "$TMP/tar.err" | cut -c1-40), ChunkedEncodingError"
