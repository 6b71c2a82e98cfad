package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMovePath(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	writeTestFile(t, a, "a\n")
	writeTestFile(t, b, "b\n")

	code, body := call(t, ts, "POST", "/move_path", map[string]any{"from": a, "to": b})
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Equal(t, "b\n", readTestFile(t, b))

	code, body = call(t, ts, "POST", "/move_path", map[string]any{"from": a, "to": b, "overwrite": true})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, map[string]any{"success": true}, body)
	assert.Equal(t, "a\n", readTestFile(t, b))
	assert.NoFileExists(t, a)

	code, _ = call(t, ts, "POST", "/move_path", map[string]any{"from": a, "to": b})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, "POST", "/move_path", map[string]any{"from": a})
	assert.Equal(t, http.StatusBadRequest, code)
}

// Across file systems (a tmpfs), a directory is copied, then removed,
// modes and links kept.
func TestMovePathAcrossFileSystems(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	other := mountTmpfs(t, "16m")
	src := filepath.Join(t.TempDir(), "tree")
	writeTestFile(t, filepath.Join(src, "sub", "x.sh"), "echo hi\n")
	require.NoError(t, os.Chmod(filepath.Join(src, "sub", "x.sh"), 0o750))
	require.NoError(t, os.Symlink("sub/x.sh", filepath.Join(src, "link")))
	dst := filepath.Join(other, "moved")

	code, body := call(t, ts, "POST", "/move_path", map[string]any{"from": src, "to": dst})
	require.Equal(t, http.StatusOK, code, body)
	assert.NoDirExists(t, src)
	assert.Equal(t, "echo hi\n", readTestFile(t, filepath.Join(dst, "sub", "x.sh")))
	fi, err := os.Stat(filepath.Join(dst, "sub", "x.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
	target, err := os.Readlink(filepath.Join(dst, "link"))
	require.NoError(t, err)
	assert.Equal(t, "sub/x.sh", target)
	entries, err := os.ReadDir(other)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary directory left")
}

func TestCopyPath(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	writeTestFile(t, filepath.Join(src, "a.txt"), "a\n")
	require.NoError(t, os.Chmod(filepath.Join(src, "a.txt"), 0o640))

	code, body := call(t, ts, "POST", "/copy_path", map[string]any{"from": src, "to": filepath.Join(dir, "dst")})
	assert.Equal(t, http.StatusBadRequest, code, "a directory without recursive")
	assert.Contains(t, body["error"], "recursive")

	code, body = call(t, ts, "POST", "/copy_path", map[string]any{"from": src, "to": filepath.Join(dir, "dst"), "recursive": true})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "a\n", readTestFile(t, filepath.Join(dir, "dst", "a.txt")))
	assert.Equal(t, "a\n", readTestFile(t, filepath.Join(src, "a.txt")))
	fi, err := os.Stat(filepath.Join(dir, "dst", "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())

	one := filepath.Join(dir, "one.txt")
	code, _ = call(t, ts, "POST", "/copy_path", map[string]any{"from": filepath.Join(src, "a.txt"), "to": filepath.Join(dir, "dst", "a.txt")})
	assert.Equal(t, http.StatusConflict, code)
	code, _ = call(t, ts, "POST", "/copy_path", map[string]any{"from": filepath.Join(src, "a.txt"), "to": one})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a\n", readTestFile(t, one))
	code, _ = call(t, ts, "POST", "/copy_path", map[string]any{"from": filepath.Join(dir, "missing"), "to": one, "overwrite": true})
	assert.Equal(t, http.StatusNotFound, code)
}

func TestChmodPath(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "run.sh")
	writeTestFile(t, p, "true\n")
	code, body := call(t, ts, "POST", "/chmod_path", map[string]any{"path": p, "mode": "0755"})
	require.Equal(t, http.StatusOK, code, body)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	code, _ = call(t, ts, "POST", "/chmod_path", map[string]any{"path": p, "mode": "rwx"})
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, ts, "POST", "/chmod_path", map[string]any{"path": p + ".missing", "mode": "644"})
	assert.Equal(t, http.StatusNotFound, code)
}

// As nobody, a move out of a directory nobody may not write is 403 and
// moves nothing; a copy nobody makes is nobody's.
func TestPathOpsAsUser(t *testing.T) {
	work, parent := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	roots := filepath.Join(parent, "root.txt")
	writeTestFile(t, roots, "r\n")
	code, body := call(t, ts, "POST", "/move_path", map[string]any{"from": roots, "to": filepath.Join(work, "r.txt"), "user": "nobody"})
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.FileExists(t, roots)

	code, body = call(t, ts, "POST", "/copy_path", map[string]any{"from": roots, "to": filepath.Join(work, "r.txt"), "user": "nobody"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, uint32(nobodyUID), uidOf(t, filepath.Join(work, "r.txt")))
}
