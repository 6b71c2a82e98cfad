package server

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/checkpoint"
)

// TestCheckpointEndpoints: create, changes with a diff that patch -p1
// applies, restore, list and delete, over HTTP; unknown ids and HEAD of
// a path without checkpoints are 404.
func TestCheckpointEndpoints(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := watchDir(t)
	shIn(t, root, "mkdir -p src && printf 'a\\nb\\nc\\n' > src/main.txt && printf 'x\\n' > gone.txt && printf '\\000bin' > b.dat && chmod 644 src/main.txt")
	orig := filepath.Join(t.TempDir(), "orig")
	require.NoError(t, exec.Command("cp", "-a", root, orig).Run())

	code, body := call(t, ts, http.MethodGet, "/changes?since=HEAD&path="+url.QueryEscape(root), nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "no such checkpoint of "+root+" (HEAD)", body["error"])

	code, cp := call(t, ts, http.MethodPost, "/create_checkpoint", map[string]any{"path": root, "name": "first"})
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, 3.0, cp["files"])
	assert.Equal(t, root, cp["path"])
	id := cp["id"].(string)

	shIn(t, root, "printf 'a\\nB\\nc\\n' > src/main.txt && rm gone.txt && echo new > new.txt && printf '\\000BIN' > b.dat && chmod 755 src/main.txt")
	code, ch := call(t, ts, http.MethodGet, "/changes?diff=true&since=HEAD&path="+url.QueryEscape(root), nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, []any{"new.txt"}, ch["added"])
	assert.Equal(t, []any{"b.dat", "src/main.txt"}, ch["modified"])
	assert.Equal(t, []any{"gone.txt"}, ch["deleted"])
	assert.Equal(t, []any{"src/main.txt"}, ch["mode_changed"])
	assert.Equal(t, false, ch["truncated"])
	diff := ch["diff"].(string)
	assert.Contains(t, diff, "Binary files a/b.dat and b/b.dat differ\n")
	assert.Contains(t, diff, "--- /dev/null\n+++ b/new.txt\n")
	assert.Contains(t, diff, "--- a/gone.txt\n+++ /dev/null\n")
	patch := exec.Command("patch", "-p1", "-s", "-E")
	patch.Dir = orig
	patch.Stdin = strings.NewReader(diff)
	out, err := patch.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, f := range []string{"src/main.txt", "new.txt"} {
		want, _ := os.ReadFile(filepath.Join(root, f))
		got, _ := os.ReadFile(filepath.Join(orig, f))
		assert.Equal(t, string(want), string(got), f)
	}
	assert.NoFileExists(t, filepath.Join(orig, "gone.txt"))

	code, res := call(t, ts, http.MethodPost, "/restore_checkpoint", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"restored": []any{"b.dat", "gone.txt", "src/main.txt"}, "deleted": []any{"new.txt"}, "mode_changed": []any{}}, res)
	data, _ := os.ReadFile(filepath.Join(root, "src/main.txt"))
	assert.Equal(t, "a\nb\nc\n", string(data))
	fi, err := os.Stat(filepath.Join(root, "src/main.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	code, list := call(t, ts, http.MethodGet, "/list_checkpoints", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, list["checkpoints"], 1)
	code, del := call(t, ts, http.MethodPost, "/delete_checkpoint", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	assert.Positive(t, del["freed_bytes"])
	code, _ = call(t, ts, http.MethodPost, "/delete_checkpoint", map[string]any{"id": id})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, http.MethodPost, "/restore_checkpoint", map[string]any{"id": id})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, http.MethodPost, "/create_checkpoint", map[string]any{"path": filepath.Join(root, "nope")})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, http.MethodGet, "/changes", nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

// TestCheckpointBudget: past the budget, 507 naming it, and nothing
// stored.
func TestCheckpointBudget(t *testing.T) {
	store, err := checkpoint.Open(checkpoint.Options{Dir: t.TempDir(), Budget: 1 << 10, BudgetText: "1KiB"})
	require.NoError(t, err)
	ts, _ := newTestServer(t, testServer{setup: func(s *Server) { s.checkpoints = store }})
	root := watchDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, "big"), make([]byte, 4<<10), 0o644))
	code, body := call(t, ts, http.MethodPost, "/create_checkpoint", map[string]any{"path": root})
	assert.Equal(t, http.StatusInsufficientStorage, code)
	assert.Equal(t, 1024.0, body["budget"])
	assert.True(t, strings.HasSuffix(body["error"].(string), "checkpoint budget 1KiB (-checkpoint-budget)"), body["error"])
	code, list := call(t, ts, http.MethodGet, "/list_checkpoints", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"checkpoints": []any{}, "stored_bytes": 0.0, "budget": 1024.0}, list)
}
