#!/usr/bin/env bash
# The workspace tools with curl: POST /grep?stream=1 read by curl -N as
# NDJSON (every line a JSON object, one per match in path order, the last
# the summary without matches), the same request unstreamed giving the
# same matches, an invalid pattern a 400 naming it, and /edit_file with
# curl's If-Match from GET /files: 412 after another writer, then 200.
# The agent uses rg when run.sh found it on PATH (Debian's ripgrep).
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

W="$TMP/tree"
for i in $(seq -w 1 40); do
  mkdir -p "$W/src/d$i"
  printf 'package x\n// needle %s\n' "$i" >"$W/src/d$i/f.go"
done
mkdir -p "$W/node_modules/m"
printf 'needle\n' >"$W/node_modules/m/i.js"

body=$("$PY" -c 'import json, sys; print(json.dumps({"pattern": "needle [0-9]+", "path": sys.argv[1]}))' "$W")
curl -sS -N --max-time 20 --fail-with-body -D "$TMP/headers" -X POST "$SANDBOX_URL/grep?stream=1" \
  -H "$AUTH" -H 'Content-Type: application/json' -d "$body" >"$TMP/stream" || fail "curl: $(cat "$TMP/stream")"
grep -qi '^content-type: application/x-ndjson' "$TMP/headers" || fail "not NDJSON: $(cat "$TMP/headers")"
curl -sS --max-time 20 --fail-with-body -X POST "$SANDBOX_URL/grep" \
  -H "$AUTH" -H 'Content-Type: application/json' -d "$body" >"$TMP/whole" || fail "curl: $(cat "$TMP/whole")"
"$PY" - "$TMP/stream" "$TMP/whole" <<'P' || fail "the NDJSON stream is not the reply"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
whole = json.load(open(sys.argv[2]))
*matches, summary = lines
assert len(matches) == 40, len(matches)
assert matches == whole["matches"], "the same matches, in the same order"
assert [m["path"] for m in matches] == sorted(m["path"] for m in matches)
assert "matches" not in summary and summary["stopped_by"] == "end", summary
assert summary["skipped"]["excluded"] == 1 and summary["files_matched"] == 40, summary
del whole["matches"]
assert summary == whole, (summary, whole)
P

code=$(curl -sS --max-time 10 -o "$TMP/bad" -w '%{http_code}' -X POST "$SANDBOX_URL/grep?stream=1" \
  -H "$AUTH" -H 'Content-Type: application/json' -d '{"pattern": "(", "path": "/"}')
[ "$code" = 400 ] && grep -q '"pattern":"("' "$TMP/bad" || fail "invalid pattern: $code $(cat "$TMP/bad")"

F="$W/src/d01/f.go"
etag=$(curl -sS --max-time 10 -I -H "$AUTH" "$SANDBOX_URL/files?path=$F" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
[ -n "$etag" ] || fail "no ETag"
printf 'package x\n// needle 01, changed\n' >"$F" # another writer
edit=$("$PY" -c 'import json, sys; print(json.dumps({"path": sys.argv[1], "old": "needle", "new": "pin"}))' "$F")
code=$(curl -sS --max-time 10 -o "$TMP/edit" -w '%{http_code}' -X POST "$SANDBOX_URL/edit_file" \
  -H "$AUTH" -H "If-Match: $etag" -H 'Content-Type: application/json' -d "$edit")
[ "$code" = 412 ] || fail "a stale If-Match: $code $(cat "$TMP/edit")"
etag=$(curl -sS --max-time 10 -I -H "$AUTH" "$SANDBOX_URL/files?path=$F" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
code=$(curl -sS --max-time 10 -o "$TMP/edit" -w '%{http_code}' -X POST "$SANDBOX_URL/edit_file" \
  -H "$AUTH" -H "If-Match: $etag" -H 'Content-Type: application/json' -d "$edit")
[ "$code" = 200 ] && grep -q '^// pin 01, changed$' "$F" || fail "edit_file: $code $(cat "$TMP/edit")"

echo "40 matches streamed as NDJSON = the whole reply; 400 for a bad pattern; If-Match 412 then 200"
