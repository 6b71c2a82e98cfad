package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// edit_file is /edit_file's edit: an ambiguous or missing old text is an
// error result that says where to look and changes nothing; a unique one
// is replaced, and the reply is its diff.
func TestMCPEditFile(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")
	path := filepath.Join(t.TempDir(), "a.py")
	require.NoError(t, os.WriteFile(path, []byte("x = 1\ny = 2\nx = 1\n"), 0o644))

	res := callSDK(t, cs, "edit_file", map[string]any{"path": path, "old": "x = 1", "new": "x = 3"})
	require.True(t, res.IsError, "an ambiguous edit is refused")
	assert.Contains(t, textOf(res), "found 2 times, expected 1")
	assert.Contains(t, textOf(res), "at lines 1, 3")
	assert.Equal(t, []any{1.0, 3.0}, structured(t, res)["lines"])
	assert.Equal(t, "x = 1\ny = 2\nx = 1\n", fileText(t, path), "nothing was written")

	res = callSDK(t, cs, "edit_file", map[string]any{"path": path, "old": "z = 2", "new": "z = 3"})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "old text not found in "+path+"; the closest line is 2: y = 2")

	res = callSDK(t, cs, "edit_file", map[string]any{"path": path, "old": "y = 2", "new": "y = 20"})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), "replaced 1 occurrence(s)")
	assert.Contains(t, textOf(res), "-y = 2\n+y = 20\n")
	got := structured(t, res)
	assert.EqualValues(t, 1, got["replacements"])
	assert.NotEmpty(t, got["etag"])
	assert.Equal(t, false, got["diff_truncated"])

	res = callSDK(t, cs, "edit_file", map[string]any{"path": path, "old": "x = 1", "new": "x = 3", "replace_all": true})
	require.False(t, res.IsError, textOf(res))
	assert.EqualValues(t, 2, structured(t, res)["replacements"])
	assert.Equal(t, "x = 3\ny = 20\nx = 3\n", fileText(t, path))

	res = callSDK(t, cs, "edit_file", map[string]any{"path": path + ".missing", "old": "a", "new": "b"})
	assert.True(t, res.IsError)
	assert.Contains(t, textOf(res), "no such file")
}

// apply_patch is /apply_patch: all files or none; a hunk that does not
// apply is an error result naming the file, the hunk and the nearest
// lines.
func TestMCPApplyPatch(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "one.txt"), []byte("a\nb\n"), 0o644))

	res := callSDK(t, cs, "apply_patch", map[string]any{"cwd": dir, "patch": "*** Begin Patch\n" +
		"*** Update File: one.txt\n@@\n-a\n+A\n" +
		"*** Add File: two.txt\n+two\n" +
		"*** Update File: one.txt\n@@\n-nowhere\n+w\n" +
		"*** End Patch\n"})
	require.True(t, res.IsError)
	assert.Equal(t, "a\nb\n", fileText(t, filepath.Join(dir, "one.txt")))
	assert.NoFileExists(t, filepath.Join(dir, "two.txt"), "all or nothing")

	res = callSDK(t, cs, "apply_patch", map[string]any{"cwd": dir, "patch": "*** Begin Patch\n" +
		"*** Update File: one.txt\n@@\n-a\n+A\n@@\n-nowhere\n+w\n*** End Patch\n"})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "hunk 2 does not apply")
	assert.Contains(t, textOf(res), "Nothing was changed.")
	got := structured(t, res)
	assert.Equal(t, filepath.Join(dir, "one.txt"), got["file"])
	assert.EqualValues(t, 2, got["hunk"])

	res = callSDK(t, cs, "apply_patch", map[string]any{"cwd": dir, "patch": "*** Begin Patch\n" +
		"*** Update File: one.txt\n@@\n-a\n+A\n*** Add File: two.txt\n+two\n*** End Patch\n"})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), "update "+filepath.Join(dir, "one.txt"))
	assert.Contains(t, textOf(res), "add "+filepath.Join(dir, "two.txt"))
	assert.Contains(t, textOf(res), "-a\n+A\n")
	assert.Len(t, structured(t, res)["files"], 2)
	assert.Equal(t, "A\nb\n", fileText(t, filepath.Join(dir, "one.txt")))
	assert.Equal(t, "two\n", fileText(t, filepath.Join(dir, "two.txt")))

	res = callSDK(t, cs, "apply_patch", map[string]any{"patch": "not a patch"})
	assert.True(t, res.IsError)
}
