package files

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// chmodProc, chmodAt's way where fchmodat2 is missing, sets the mode of
// the file a handle holds (O_PATH, as chmodAt opens it), not of what its
// name is now: as root, and as the file's owner.
func TestChmodProc(t *testing.T) {
	dir := reachableDir(t)
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	fd, err := openPathAt(unix.AT_FDCWD, p, unix.O_NOFOLLOW)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, os.Rename(p, p+".moved"))
	require.NoError(t, os.WriteFile(p, nil, 0o600)) // another file at its name now
	require.NoError(t, chmodProc(fd, 0o751))
	fi, err := os.Stat(p + ".moved")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), fi.Mode().Perm())
	fi, err = os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file now at the name is untouched")

	if o := nobodyIfRoot(); o != nil {
		require.NoError(t, os.Chown(p+".moved", int(o.UID), int(o.GID)))
		require.NoError(t, asOwner(o, func() error { return chmodProc(fd, 0o640) }))
		fi, err = os.Stat(p + ".moved")
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	}
}
