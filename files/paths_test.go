package files

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCopyRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tree")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	err := Copy(t.Context(), src, filepath.Join(dir, "dst"), false, true, nil)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.NoDirExists(t, filepath.Join(dir, "dst"), "nothing placed")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary directory left")
}

func TestMoveRefusesToClobber(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(b, []byte("b"), 0o644))
	assert.ErrorIs(t, Move(t.Context(), a, b, false, nil), syscall.EEXIST)
	assert.ErrorIs(t, Move(t.Context(), filepath.Join(dir, "x"), b, true, nil), os.ErrNotExist)
	assert.ErrorIs(t, Move(t.Context(), a, dir+"/.", true, nil), ErrInvalidPath)
	require.NoError(t, Move(t.Context(), a, b, true, nil))
	got, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, "a", string(got))
}
