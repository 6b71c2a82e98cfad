package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestEditFile(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "a.txt")
	writeTestFile(t, p, "one\r\ntwo\r\none\r\n")

	code, body := call(t, ts, "POST", "/edit_file", map[string]any{"path": p, "old": "one\n", "new": "uno\nein\n"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, []any{1.0, 3.0}, body["lines"], "each match's line")
	assert.Equal(t, "one\r\ntwo\r\none\r\n", readTestFile(t, p))

	code, body = call(t, ts, "POST", "/edit_file", map[string]any{"path": p, "old": "one\n", "new": "uno\nein\n", "replace_all": true})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 2.0, body["replacements"])
	assert.Contains(t, body["diff"], "+uno")
	assert.Equal(t, "uno\r\nein\r\ntwo\r\nuno\r\nein\r\n", readTestFile(t, p), "CRLF kept")

	code, body = call(t, ts, "POST", "/edit_file", map[string]any{"path": p, "old": "twoo"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "old text not found", body["error"])
	assert.Equal(t, map[string]any{"line": 3.0, "text": "two"}, body["closest"])

	code, _ = call(t, ts, "POST", "/edit_file", map[string]any{"path": p + ".missing", "old": "x"})
	assert.Equal(t, http.StatusNotFound, code)
	code, body = call(t, ts, "POST", "/edit_file", map[string]any{"path": p})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "old is required", body["error"])
}

// A writer between the client's read and its edit makes the edit fail
// with 412, by the body's if_match and by the If-Match header alike.
func TestEditFileIfMatch(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "a.txt")
	writeTestFile(t, p, "hello\n")
	resp := request(t, ts, "GET", "/files?path="+p, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tag := resp.Header.Get("ETag")
	require.NotEmpty(t, tag)

	writeTestFile(t, p, "hello, world\n") // the concurrent writer

	code, body := call(t, ts, "POST", "/edit_file", map[string]any{"path": p, "old": "hello", "new": "bye", "if_match": tag})
	assert.Equal(t, http.StatusPreconditionFailed, code, body)
	req, err := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/edit_file",
		jsonBody(t, map[string]any{"path": p, "old": "hello", "new": "bye"}))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("If-Match", tag)
	hresp, err := ts.Client().Do(req)
	require.NoError(t, err)
	hresp.Body.Close()
	assert.Equal(t, http.StatusPreconditionFailed, hresp.StatusCode)
	assert.Equal(t, "hello, world\n", readTestFile(t, p))

	resp = request(t, ts, "GET", "/files?path="+p, nil)
	code, body = call(t, ts, "POST", "/edit_file", map[string]any{"path": p, "old": "hello", "new": "bye", "if_match": resp.Header.Get("ETag")})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "bye, world\n", readTestFile(t, p))
	resp = request(t, ts, "GET", "/files?path="+p, nil)
	assert.Equal(t, resp.Header.Get("ETag"), body["etag"], "the reply's ETag is GET /files's")
}

func TestApplyPatch(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "a.py"), "def f():\n    return 1\n")
	writeTestFile(t, filepath.Join(dir, "old.txt"), "moved\n")
	writeTestFile(t, filepath.Join(dir, "gone.txt"), "bye\n")
	patch := "```\n*** Begin Patch\n" +
		"*** Add File: new/b.txt\n+hello\n" +
		"*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n" +
		"*** Update File: old.txt\n*** Move to: sub/new.txt\n" +
		"*** Delete File: " + filepath.Join(dir, "gone.txt") + "\n" +
		"*** End Patch\n```\n"
	code, body := call(t, ts, "POST", "/apply_patch", map[string]any{"patch": patch, "cwd": dir})
	require.Equal(t, http.StatusOK, code, body)
	var actions []string
	for _, f := range body["files"].([]any) {
		actions = append(actions, f.(map[string]any)["action"].(string))
	}
	assert.Equal(t, []string{"add", "update", "move", "delete"}, actions)
	assert.Equal(t, "hello\n", readTestFile(t, filepath.Join(dir, "new", "b.txt")))
	assert.Equal(t, "def f():\n    return 2\n", readTestFile(t, filepath.Join(dir, "a.py")))
	assert.Equal(t, "moved\n", readTestFile(t, filepath.Join(dir, "sub", "new.txt")))
	assert.NoFileExists(t, filepath.Join(dir, "gone.txt"))
	assert.NoFileExists(t, filepath.Join(dir, "old.txt"))
}

// A patch whose third file fails leaves the first two as they were, and
// the 409 names the file, the hunk and the nearest lines.
func TestApplyPatchAllOrNothing(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "one.txt"), "a\n")
	writeTestFile(t, filepath.Join(dir, "three.txt"), "x\ny\nz\n")
	patch := "*** Begin Patch\n" +
		"*** Update File: one.txt\n@@\n-a\n+A\n" +
		"*** Add File: two.txt\n+two\n" +
		"*** Update File: three.txt\n@@\n-x\n+X\n@@\n-nowhere\n+w\n" +
		"*** End Patch\n"
	code, body := call(t, ts, "POST", "/apply_patch", map[string]any{"patch": patch, "cwd": dir})
	require.Equal(t, http.StatusConflict, code, body)
	assert.Equal(t, filepath.Join(dir, "three.txt"), body["file"])
	assert.Equal(t, 2.0, body["hunk"])
	assert.NotEmpty(t, body["nearest"])
	assert.Equal(t, "a\n", readTestFile(t, filepath.Join(dir, "one.txt")))
	assert.NoFileExists(t, filepath.Join(dir, "two.txt"))
	assert.Equal(t, "x\ny\nz\n", readTestFile(t, filepath.Join(dir, "three.txt")))

	code, _ = call(t, ts, "POST", "/apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: /etc/x\n+x\n*** End Patch\n", "cwd": dir})
	assert.Equal(t, http.StatusBadRequest, code, "outside cwd")
	code, body = call(t, ts, "POST", "/apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: one.txt\n+x\n*** End Patch\n", "cwd": dir})
	assert.Equal(t, http.StatusConflict, code, "add onto an existing file")
	assert.Equal(t, filepath.Join(dir, "one.txt"), body["file"])
	code, _ = call(t, ts, "POST", "/apply_patch", map[string]any{"patch": "not a patch", "cwd": dir})
	assert.Equal(t, http.StatusBadRequest, code)
}

// user makes the edit that user's: the kernel refuses a file nobody
// may not replace (root's, in root's directory), and the file is left as
// it was.
func TestEditFileAsUser(t *testing.T) {
	work, parent := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	mine := filepath.Join(parent, "root.txt")
	writeTestFile(t, mine, "root's\n")
	code, body := call(t, ts, "POST", "/edit_file", map[string]any{"path": mine, "old": "root", "new": "nobody", "user": "nobody"})
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Equal(t, "root's\n", readTestFile(t, mine))

	theirs := filepath.Join(work, "theirs.txt")
	writeTestFile(t, theirs, "a\n")
	require.NoError(t, os.Chown(theirs, nobodyUID, nobodyUID))
	code, body = call(t, ts, "POST", "/edit_file", map[string]any{"path": theirs, "old": "a", "new": "b", "user": "nobody"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, uint32(nobodyUID), uidOf(t, theirs))
}

// A symbolic link inside cwd that leads outside is refused as a path
// outside cwd is: 400, and the file it leads to is left as it was.
func TestApplyPatchLinkOutside(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	outside, cwd := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	writeTestFile(t, secret, "secret\n")
	require.NoError(t, os.Symlink(outside, filepath.Join(cwd, "out")))
	code, body := call(t, ts, "POST", "/apply_patch", map[string]any{"cwd": cwd,
		"patch": "*** Begin Patch\n*** Update File: out/secret.txt\n-secret\n+changed\n*** End Patch"})
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body["error"], "leads outside")
	assert.Equal(t, "secret\n", readTestFile(t, secret))
}
