package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRemovable(t *testing.T) {
	// Only checked, never removed: a mistake here must not delete the
	// test's working directory or the machine's root.
	refused := []string{"/", "//", "///", ".", "..", "./", "../", "/.", "/..", "x/.", "x/..", "x/./", "x/..//",
		"/tmp/x/..", "/tmp/x/.", "/tmp/x/../", "/tmp/.././.."}
	for _, p := range refused {
		assert.ErrorIs(t, removable(p), ErrInvalidPath, p)
	}
	allowed := []string{"x", "x/", "/tmp/x", "/tmp/x/", ".x", "x.", "..x", "x..", "...", "x/...", "/tmp/./x", "/tmp/../x"}
	for _, p := range allowed {
		assert.NoError(t, removable(p), p)
	}
	assert.EqualError(t, removable("/tmp/x/.."), `invalid path "/tmp/x/..": refusing to delete a path whose last element is ".."`)
	assert.EqualError(t, removable("//"), `invalid path "//": refusing to delete the root directory`)
}

// delete_dir of "x/.." used to empty x's parent (x included), then report
// a failure to remove "..". Nothing is removed now.
func TestDeleteDirRefusesDotDot(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	require.NoError(t, os.MkdirAll(filepath.Join(a, "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(a, "f"), []byte("x"), 0o644))
	for _, p := range []string{a + "/b/..", a + "/b/../", a + "/.", a + "/b/./"} {
		err := DeleteDir(t.Context(), p, nil)
		assert.ErrorIs(t, err, ErrInvalidPath, p)
		assert.FileExists(t, filepath.Join(a, "f"), p)
		assert.DirExists(t, filepath.Join(a, "b"), p)
	}
}

// DeleteDir keeps os.RemoveAll's error texts.
func TestDeleteDirErrorsAsRemoveAll(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may remove anything")
	}
	mk := func() string {
		dir := filepath.Join(t.TempDir(), "d")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "ro", "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ro", "sub", "f"), nil, 0o644))
		require.NoError(t, os.Chmod(filepath.Join(dir, "ro"), 0o555))
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755) })
		return dir
	}
	d1, d2 := mk(), mk()
	want := os.RemoveAll(d1)
	require.Error(t, want)
	got := DeleteDir(t.Context(), d2, nil)
	require.Error(t, got)
	assert.Equal(t, strings.ReplaceAll(want.Error(), d1, "D"), strings.ReplaceAll(got.Error(), d2, "D"))
}
