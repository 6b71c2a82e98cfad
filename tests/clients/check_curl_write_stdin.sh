#!/usr/bin/env bash
# curl on /write_stdin: a process started with "stdin": true is fed a
# binary file with --data-binary @file and
# Content-Type: application/octet-stream (8 MiB: the agent splices it,
# and curl's "Expect: 100-continue" is answered), stdin is closed, and the
# digest sha256sum prints in the log matches the local one. Then the JSON
# form: text and base64 into cat, each written as sent.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

# start_stdin CMD starts CMD with stdin kept open and prints its id.
start_stdin() {
  local body reply
  body=$("$PY" -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1], "stdin": True}))' "$1")
  reply=$(curl -sS --max-time 10 --fail-with-body -X POST "$SANDBOX_URL/start_process" \
    -H "$AUTH" -H 'Content-Type: application/json' -d "$body") || fail "start_process: $reply"
  "$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$reply"
}

# field JSON KEY prints field KEY of the JSON object JSON.
field() { "$PY" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# log_data ID prints the data of every log line of process ID, once it has
# ended.
log_data() {
  curl -sS -N --max-time 20 --fail-with-body "$SANDBOX_URL/process_logs_streaming?id=$1" -H "$AUTH" |
    "$PY" -c '
import json, sys
for line in sys.stdin:
    if line.startswith("data: "):
        d = json.loads(line[6:])
        if "data" in d:
            print(d["data"])'
}

close_stdin() {
  local reply
  reply=$(curl -sS --max-time 10 --fail-with-body -X POST "$SANDBOX_URL/close_stdin" \
    -H "$AUTH" -H 'Content-Type: application/json' -d "{\"id\": \"$1\"}") || fail "close_stdin: $reply"
  [ "$(field "$reply" success)" = True ] || fail "close_stdin: $reply"
}

# Raw: a binary file into sha256sum.
head -c $((8 << 20)) /dev/urandom >"$TMP/file"
size=$(wc -c <"$TMP/file")
id=$(start_stdin sha256sum)
reply=$(curl -sS --max-time 30 --fail-with-body -X POST "$SANDBOX_URL/write_stdin?id=$id" \
  -H "$AUTH" -H 'Content-Type: application/octet-stream' --data-binary @"$TMP/file") || fail "write_stdin: $reply"
[ "$(field "$reply" written)" = "$size" ] || fail "write_stdin wrote $(field "$reply" written) bytes, want $size: $reply"
close_stdin "$id"
close_stdin "$id" # idempotent
want=$(sha256sum <"$TMP/file")
got=$(log_data "$id")
[ "$got" = "$want" ] || fail "the agent's sha256sum printed '$got', want '$want'"

# JSON: text, then base64 (bytes that are not UTF-8), into cat.
id=$(start_stdin 'cat; echo eof')
for body in "{\"id\": \"$id\", \"data\": \"hello\\n\"}" \
  "{\"id\": \"$id\", \"data\": \"$(printf 'w\xf6rld\n' | base64)\", \"is_base64\": true}"; do
  reply=$(curl -sS --max-time 10 --fail-with-body -X POST "$SANDBOX_URL/write_stdin" \
    -H "$AUTH" -H 'Content-Type: application/json' -d "$body") || fail "write_stdin: $reply"
  [ "$(field "$reply" success)" = True ] || fail "write_stdin: $reply"
done
close_stdin "$id"
printf 'hello\nw\xef\xbf\xbdrld\neof\n' >"$TMP/want" # the log is JSON text: the invalid byte reads U+FFFD
log_data "$id" >"$TMP/got"
same "$TMP/want" "$TMP/got"

# Errors are JSON: an unknown id is 404.
code=$(curl -sS --max-time 10 -o "$TMP/err" -w '%{http_code}' -X POST "$SANDBOX_URL/write_stdin?id=nope" \
  -H "$AUTH" -H 'Content-Type: application/octet-stream' --data-binary 'x')
[ "$code" = 404 ] || fail "unknown id: $code $(cat "$TMP/err")"

echo "8 MiB with --data-binary @file into sha256sum: digest matches; JSON text and base64 into cat; 404 for an unknown id"
