package server

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/files"
)

func TestFileWriteReadDelete(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	p := filepath.Join(dir, "a.txt")
	ok := map[string]any{"success": true}

	code, body := call(t, ts, "POST", "/write_file", map[string]any{"path": p, "content": "hello <&> é\n"})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, ok, body)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "hello <&> é\n", string(got))

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"content": "hello <&> é\n"}, body, "no is_base64 key for text")

	// Writing truncates; an empty content is a content.
	_, body = call(t, ts, "POST", "/write_file", map[string]any{"path": p, "content": ""})
	assert.Equal(t, ok, body)
	_, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p})
	assert.Equal(t, map[string]any{"content": ""}, body, "an empty file still has a content key")

	_, body = call(t, ts, "POST", "/delete_file", map[string]any{"path": p})
	assert.Equal(t, ok, body)
	assert.NoFileExists(t, p)

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"error": "open " + p + ": no such file or directory"}, body)

	code, body = call(t, ts, "POST", "/delete_file", map[string]any{"path": p})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": false, "error": "remove " + p + ": no such file or directory"}, body)

	missing := filepath.Join(dir, "no", "such.txt")
	code, body = call(t, ts, "POST", "/write_file", map[string]any{"path": missing, "content": "x"})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": false, "error": "open " + missing + ": no such file or directory"}, body,
		"parents are not created")
}

func TestFileBinaryRoundTrip(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "bin")
	data := make([]byte, 0, 512)
	for i := range 512 {
		data = append(data, byte(i*7)) // every byte value, invalid UTF-8 included
	}
	enc := base64.StdEncoding.EncodeToString(data)

	code, body := call(t, ts, "POST", "/write_file", map[string]any{"path": p, "content": enc, "is_base64": true})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": true}, body)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, data, got)

	for _, asked := range []bool{false, true} {
		_, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p, "is_base64": asked})
		assert.Equal(t, map[string]any{"content": enc, "is_base64": true}, body, "is_base64 asked: %v", asked)
	}

	// Base64 on request, even for text.
	txt := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(txt, []byte("hi"), 0o644))
	_, body = call(t, ts, "POST", "/read_file", map[string]any{"path": txt, "is_base64": true})
	assert.Equal(t, map[string]any{"content": "aGk=", "is_base64": true}, body)
	_, body = call(t, ts, "POST", "/read_file", map[string]any{"path": txt, "is_base64": false})
	assert.Equal(t, map[string]any{"content": "hi"}, body)
}

func TestFileDeleteRefusesDirectory(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, os.Mkdir(dir, 0o755))

	code, body := call(t, ts, "POST", "/delete_file", map[string]any{"path": dir})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": false, "error": "remove " + dir + ": is a directory"}, body)
	assert.DirExists(t, dir, "not even an empty directory is removed")
}

func TestFileReadTooLarge(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(files.MaxRead+1)) // sparse: costs no disk
	require.NoError(t, f.Close())

	code, body := call(t, ts, "POST", "/read_file", map[string]any{"path": p})
	assert.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, "content")
	assert.Contains(t, body["error"], "file too large")
	assert.Contains(t, body["error"], "67108864")
	assert.Contains(t, body["error"], "GET /files?path="+p, "the error names the way to fetch it")
}

func TestDirMakeListDelete(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := t.TempDir()
	ok := map[string]any{"success": true}

	nested := filepath.Join(root, "a", "b", "c")
	code, body := call(t, ts, "POST", "/make_dir", map[string]any{"path": nested, "recursive": false})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, ok, body, "recursive is ignored: make_dir is always mkdir -p")
	assert.DirExists(t, nested)

	_, body = call(t, ts, "POST", "/make_dir", map[string]any{"path": nested})
	assert.Equal(t, ok, body, "an existing directory is success")

	file := filepath.Join(root, "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, p := range []string{file, filepath.Join(file, "sub")} {
		code, body = call(t, ts, "POST", "/make_dir", map[string]any{"path": p})
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, false, body["success"], p)
		assert.Regexp(t, "file exists|not a directory", body["error"], p)
	}

	code, body = call(t, ts, "POST", "/list_dir", map[string]any{"path": root})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"entries": []any{"a", "f"}}, body)

	code, body = call(t, ts, "POST", "/list_dir", map[string]any{"path": nested})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"entries": []any{}}, body, "an empty directory gives [], not null")

	missing := filepath.Join(root, "nope")
	code, body = call(t, ts, "POST", "/list_dir", map[string]any{"path": missing})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"error": "open " + missing + ": no such file or directory"}, body)

	_, body = call(t, ts, "POST", "/delete_dir", map[string]any{"path": filepath.Join(root, "a")})
	assert.Equal(t, ok, body)
	assert.NoDirExists(t, filepath.Join(root, "a"))

	_, body = call(t, ts, "POST", "/delete_dir", map[string]any{"path": missing})
	assert.Equal(t, ok, body, "rm -rf of a missing path is success")

	_, body = call(t, ts, "POST", "/delete_dir", map[string]any{"path": file})
	assert.Equal(t, map[string]any{"success": false, "error": "remove " + file + ": not a directory"}, body)
	assert.FileExists(t, file)
}

func TestDirListDetailedAndStat(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := t.TempDir()
	file, sub := filepath.Join(root, "f.txt"), filepath.Join(root, "sub")
	require.NoError(t, os.WriteFile(file, []byte("hello"), 0o644))
	require.NoError(t, os.Chmod(file, 0o644)) // whatever the umask
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.Chmod(sub, 0o755))
	start := time.Now()

	checkEntry := func(t *testing.T, want map[string]any, got any) {
		t.Helper()
		e, isMap := got.(map[string]any)
		require.True(t, isMap, "entry %v is not an object", got)
		mt, isString := e["mod_time"].(string)
		require.True(t, isString, "mod_time %v is not a string", e["mod_time"])
		ts, err := time.Parse(time.RFC3339Nano, mt)
		require.NoError(t, err)
		assert.Equal(t, time.UTC, ts.Location(), mt)
		assert.WithinDuration(t, start, ts, time.Minute)
		delete(e, "mod_time")
		assert.Equal(t, want, e)
	}
	wantFile := map[string]any{"name": "f.txt", "is_dir": false, "size": float64(5), "mode": "-rw-r--r--"}
	wantSub := map[string]any{"name": "sub", "is_dir": true, "mode": "drwxr-xr-x"}

	code, body := call(t, ts, "POST", "/stat_file", map[string]any{"path": file})
	assert.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "entry")
	assert.Len(t, body, 1)
	checkEntry(t, wantFile, body["entry"])

	_, body = call(t, ts, "POST", "/stat_file", map[string]any{"path": sub})
	require.Contains(t, body, "entry")
	e := body["entry"].(map[string]any)
	wantSub["size"] = e["size"] // a directory's size depends on the file system
	checkEntry(t, wantSub, e)

	missing := filepath.Join(root, "nope")
	code, body = call(t, ts, "POST", "/stat_file", map[string]any{"path": missing})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"error": "stat " + missing + ": no such file or directory"}, body)

	code, body = call(t, ts, "POST", "/list_dir", map[string]any{"path": root, "detailed": true})
	assert.Equal(t, http.StatusOK, code)
	entries, isList := body["entries"].([]any)
	require.True(t, isList, "entries %v is not a list", body["entries"])
	require.Len(t, entries, 2)
	checkEntry(t, wantFile, entries[0])
	checkEntry(t, wantSub, entries[1])

	_, body = call(t, ts, "POST", "/list_dir", map[string]any{"path": sub, "detailed": true})
	assert.Equal(t, map[string]any{"entries": []any{}}, body)
}

func TestFileAndDirBadRequests(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "x")
	endpoints := []string{"/write_file", "/read_file", "/delete_file", "/stat_file", "/make_dir", "/delete_dir", "/list_dir"}
	type badRequest struct{ path, body, want string }
	var tests []badRequest
	for _, e := range endpoints {
		tests = append(tests,
			badRequest{e, `{}`, "path is required"},
			badRequest{e, ``, "path is required"},
			badRequest{e, `{"path": "", "content": "x"}`, "path is required"},
			badRequest{e, `{"path": 5, "content": "x"}`, `field "path" must be a string`},
			badRequest{e, `{"path": `, "invalid request"},
			badRequest{e, `["/tmp"]`, "body must be a JSON object"},
			// Fields of embedded structs are named as the client wrote them.
			badRequest{e, `{"path": "/tmp/x", "user": {}}`, `invalid request: field "user" must be a string or a number`},
			badRequest{e, `{"path": "/tmp/x", "session": 5}`, `invalid request: field "session" must be a string`},
		)
	}
	tests = append(tests,
		badRequest{"/write_file", `{"path": "` + p + `", "content": 5}`, `field "content" must be a string`},
		badRequest{"/write_file", `{"path": "` + p + `", "content": "@@@", "is_base64": true}`, "invalid base64 content: "},
		badRequest{"/write_file", `{"path": "` + p + `", "content": "x", "is_base64": "yes"}`, `field "is_base64" must be a boolean`},
		badRequest{"/make_dir", `{"path": "` + p + `", "recursive": "yes"}`, `field "recursive" must be a boolean`},
		badRequest{"/list_dir", `{"path": "` + p + `", "detailed": 1}`, `field "detailed" must be a boolean`},
	)
	for _, tt := range tests {
		code, body := call(t, ts, "POST", tt.path, tt.body)
		assert.Equal(t, http.StatusBadRequest, code, "%s %s", tt.path, tt.body)
		assert.Contains(t, body["error"], tt.want, "%s %s", tt.path, tt.body)
	}
	assert.NoFileExists(t, p, "no bad request touched the file system")
}

// offset and limit select lines and add total_lines and truncated; the
// original reply, without them, stays exactly {"content"}.
func TestFileReadLines(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "a.txt")
	require.NoError(t, os.WriteFile(p, []byte("one\r\ntwo\nthree\nfour"), 0o644))

	code, body := call(t, ts, "POST", "/read_file", map[string]any{"path": p})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"content": "one\r\ntwo\nthree\nfour"}, body, "the original reply, unchanged")

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p, "offset": 2, "limit": 2})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"content": "two\nthree\n", "total_lines": 4.0, "truncated": true}, body)

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p, "limit": 1})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"content": "one\r\n", "total_lines": 4.0, "truncated": true}, body, "limit alone starts at line 1")

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p, "offset": 3})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"content": "three\nfour", "total_lines": 4.0, "truncated": false}, body)

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p, "offset": 9, "limit": 1})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"content": "", "total_lines": 4.0, "truncated": false}, body)

	code, _ = call(t, ts, "POST", "/read_file", map[string]any{"path": p, "offset": 0})
	assert.Equal(t, http.StatusBadRequest, code)

	code, body = call(t, ts, "POST", "/read_file", map[string]any{"path": p + ".missing", "offset": 1})
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body["error"], "no such file or directory")
	assert.NotContains(t, body, "total_lines")
}
