package files

import (
	"os"
	"path/filepath"
	"strings"
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

// A copy is its maker's, as cp(1) makes it: root's copy of a user's
// setuid or setgid program loses those bits (it would run as root), and
// root's copy of its own keeps them. A move across file systems keeps
// each file's owner, mode and bits, as mv(1) does.
func TestCopyOwnersAndSetuid(t *testing.T) {
	o := nobodyIfRoot()
	if o == nil {
		t.Skip("needs root: files of another owner are made")
	}
	dir := reachableDir(t)
	src := filepath.Join(dir, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	for name, mode := range map[string]os.FileMode{"users-suid": 0o755 | os.ModeSetuid, "users-sgid": 0o755 | os.ModeSetgid, "roots-suid": 0o755 | os.ModeSetuid} {
		p := filepath.Join(src, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		if strings.HasPrefix(name, "users") {
			require.NoError(t, os.Chown(p, int(o.UID), int(o.GID)))
		}
		require.NoError(t, os.Chmod(p, mode)) // after the chown, which clears setuid
	}
	require.NoError(t, os.Chown(src, int(o.UID), int(o.GID)))

	require.NoError(t, Copy(t.Context(), src, filepath.Join(dir, "copy"), false, true, nil))
	for name, want := range map[string]os.FileMode{"users-suid": 0o755, "users-sgid": 0o755, "roots-suid": 0o755 | os.ModeSetuid} {
		fi, err := os.Stat(filepath.Join(dir, "copy", name))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid), name)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "%s: the copy is its maker's", name)
	}

	other := filepath.Join(mountTmpfs(t, "16m"), "moved")
	require.NoError(t, Move(t.Context(), src, other, false, nil))
	for name, want := range map[string]os.FileMode{"users-suid": 0o755 | os.ModeSetuid, "users-sgid": 0o755 | os.ModeSetgid, "roots-suid": 0o755 | os.ModeSetuid} {
		fi, err := os.Stat(filepath.Join(other, name))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid), name)
		wantUID := uint32(0)
		if strings.HasPrefix(name, "users") {
			wantUID = o.UID
		}
		assert.Equal(t, wantUID, fi.Sys().(*syscall.Stat_t).Uid, "%s keeps its owner", name)
	}
	fi, err := os.Stat(other)
	require.NoError(t, err)
	assert.Equal(t, o.UID, fi.Sys().(*syscall.Stat_t).Uid, "the moved directory keeps its owner")
}
