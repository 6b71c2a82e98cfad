package files

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// nobody returns the Owner of user nobody. The test is skipped unless the
// agent runs as root: only root may act as another user.
func nobody(t *testing.T) *Owner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can act as another user")
	}
	u, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	require.NoError(t, err)
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	require.NoError(t, err)
	return &Owner{UID: uint32(uid), GID: uint32(gid), Groups: []uint32{uint32(gid)}}
}

// reachableDir returns a new directory of root's, mode 0755, that other
// users may enter (t.TempDir and its parent are 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	return dir
}

// ownedDir makes the directory path, owned by o, mode 0755.
func ownedDir(t *testing.T, path string, o *Owner) string {
	t.Helper()
	require.NoError(t, os.Mkdir(path, 0o755))
	require.NoError(t, os.Chown(path, int(o.UID), int(o.GID)))
	return path
}

// runAs runs the command name with args as o, and fails the test if it
// fails.
func runAs(t *testing.T, o *Owner, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.UID, Gid: o.GID}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
}

func lstatUID(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Uid
}

// The reported attack: in a directory of nobody's (a session's workdir),
// nobody makes config.json a link to a file only root may write. Root's
// writes to $WORKDIR/config.json used to follow it; each is now refused
// with EACCES, and the file is as it was.
func TestWritesRefusePlantedLink(t *testing.T) {
	nb := nobody(t)
	base := reachableDir(t)
	secret := filepath.Join(base, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's"), 0o600))
	rootDir := filepath.Join(base, "rootdir")
	require.NoError(t, os.Mkdir(rootDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rootDir, "victim"), []byte("root's"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(rootDir, "victimdir"), 0o755))
	work := ownedDir(t, filepath.Join(base, "work"), nb)
	link := filepath.Join(work, "config.json")
	runAs(t, nb, "ln", "-s", secret, link)
	runAs(t, nb, "ln", "-s", rootDir, filepath.Join(work, "dir"))
	require.Equal(t, nb.UID, lstatUID(t, link), "the link is nobody's")

	refused := func(what string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, fs.ErrPermission, what)
		assert.ErrorIs(t, err, syscall.EACCES, what)
	}
	_, err := WriteAtomic(t.Context(), link, strings.NewReader("pwned"), WriteOptions{})
	refused("WriteAtomic", err)
	assert.Contains(t, err.Error(), "a symbolic link owned by another user (uid 65534) is not followed")
	_, err = WriteAt(t.Context(), link, strings.NewReader("pwned"), AtEnd, WriteOptions{})
	refused("WriteAt append", err)
	_, err = WriteAt(t.Context(), link, strings.NewReader("pwned"), 0, WriteOptions{})
	refused("WriteAt offset", err)
	refused("Write", Write(t.Context(), link, []byte("pwned"), nil))
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "root's", string(got))

	// A link on the way, to a directory of root's.
	through := filepath.Join(work, "dir")
	_, err = WriteAtomic(t.Context(), filepath.Join(through, "new"), strings.NewReader("pwned"), WriteOptions{})
	refused("WriteAtomic through", err)
	refused("Write through", Write(t.Context(), filepath.Join(through, "victim"), []byte("pwned"), nil))
	refused("MakeDir through", MakeDir(filepath.Join(through, "made"), nil))
	refused("Delete through", Delete(filepath.Join(through, "victim"), nil))
	refused("DeleteDir through", DeleteDir(t.Context(), filepath.Join(through, "victimdir"), nil))
	assert.NoFileExists(t, filepath.Join(rootDir, "new"))
	assert.NoDirExists(t, filepath.Join(rootDir, "made"))
	assert.FileExists(t, filepath.Join(rootDir, "victim"))
	assert.DirExists(t, filepath.Join(rootDir, "victimdir"))
	got, err = os.ReadFile(filepath.Join(rootDir, "victim"))
	require.NoError(t, err)
	assert.Equal(t, "root's", string(got))
	assert.Empty(t, testutil.Leftovers(t, work))

	// The link itself may go: removing it follows nothing.
	require.NoError(t, Delete(link, nil))
	assert.FileExists(t, secret)
}

// As nobody, what a write creates, directories included, is nobody's, and
// what nobody may not write is refused, links of nobody's own included.
func TestWritesAsOwner(t *testing.T) {
	nb := nobody(t)
	base := reachableDir(t)
	work := ownedDir(t, filepath.Join(base, "work"), nb)
	secret := filepath.Join(base, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's"), 0o600))
	opts := WriteOptions{Owner: nb}

	w, err := WriteAtomic(t.Context(), filepath.Join(work, "a/b/f"), strings.NewReader("x"), opts)
	require.NoError(t, err)
	assert.True(t, w.Created)
	_, err = WriteAt(t.Context(), filepath.Join(work, "c/g"), strings.NewReader("x"), AtEnd, opts)
	require.NoError(t, err)
	require.NoError(t, MakeDir(filepath.Join(work, "m/n"), nb))
	require.NoError(t, Write(t.Context(), filepath.Join(work, "w"), []byte("x"), nb))
	for _, p := range []string{"a", "a/b", "a/b/f", "c", "c/g", "m", "m/n", "w"} {
		assert.Equal(t, nb.UID, lstatUID(t, filepath.Join(work, p)), p)
	}
	entries, err := List(t.Context(), work, nb)
	require.NoError(t, err)
	assert.Len(t, entries, 4)

	// Replacing a file of root's in nobody's directory: the new one is
	// nobody's.
	mine := filepath.Join(work, "was-roots")
	require.NoError(t, os.WriteFile(mine, []byte("root's"), 0o644))
	_, err = WriteAtomic(t.Context(), mine, strings.NewReader("x"), opts)
	require.NoError(t, err)
	assert.Equal(t, nb.UID, lstatUID(t, mine))

	refused := func(what string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, fs.ErrPermission, what)
	}
	_, err = WriteAtomic(t.Context(), filepath.Join(base, "x/f"), strings.NewReader("x"), opts)
	refused("a directory of root's", err)
	assert.NoDirExists(t, filepath.Join(base, "x"))
	_, err = WriteAtomic(t.Context(), secret, strings.NewReader("x"), opts)
	refused("a file of root's", err)
	refused("Write a file of root's", Write(t.Context(), secret, []byte("x"), nb))
	_, err = WriteAt(t.Context(), secret, strings.NewReader("x"), AtEnd, opts)
	refused("append to a file of root's", err)
	_, err = Scan(t.Context(), secret, nb)
	refused("read a file of root's", err)
	refused("MakeDir in root's", MakeDir(filepath.Join(base, "m"), nb))
	refused("Delete root's", Delete(secret, nb))
	runAs(t, nb, "ln", "-s", secret, filepath.Join(work, "config.json"))
	_, err = WriteAtomic(t.Context(), filepath.Join(work, "config.json"), strings.NewReader("x"), opts)
	refused("nobody's own link to root's file", err)
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "root's", string(got))
	assert.Empty(t, testutil.Leftovers(t, work))
	assert.Empty(t, testutil.Leftovers(t, base))
}

// An upload that fails removes the directories it made, and only those.
func TestFailedUploadRemovesMadeDirs(t *testing.T) {
	cut := errors.New("the client left")
	for i, o := range []*Owner{nil, nobodyIfRoot()} {
		kept := filepath.Join(t.TempDir(), "kept")
		require.NoError(t, os.Mkdir(kept, 0o755))
		if o != nil {
			kept = filepath.Join(reachableDir(t), strconv.Itoa(i))
			ownedDir(t, kept, o)
		}
		_, err := WriteAtomic(t.Context(), filepath.Join(kept, "x/y/f"), &errAfter{n: 1 << 20, err: cut}, WriteOptions{Owner: o})
		require.ErrorIs(t, err, cut)
		_, err = WriteAt(t.Context(), filepath.Join(kept, "p/q/f"), strings.NewReader("x"), 5, WriteOptions{Owner: o})
		require.ErrorIs(t, err, ErrOffset)
		entries, err := os.ReadDir(kept)
		require.NoError(t, err)
		assert.Empty(t, entries, "owner %v", o)
	}
}

// nobodyIfRoot is the Owner of uid 65534 when the test runs as root, else
// nil.
func nobodyIfRoot() *Owner {
	if os.Geteuid() != 0 {
		return nil
	}
	return &Owner{UID: 65534, GID: 65534}
}

func TestTrustLink(t *testing.T) {
	const root, nb, other = 0, 65534, 1000
	tests := []struct {
		name                 string
		writer, link, dirUID uint32
		dirMode              uint32
		want                 bool
	}{
		{"the writer's own", nb, nb, other, 0o755, true},
		{"root's", nb, root, other, 0o1777, true},
		{"root's own", root, root, nb, 0o755, true},
		{"in a directory only root writes", root, other, root, 0o755, true},
		{"planted for root", root, nb, nb, 0o755, false},
		{"planted in a shared root directory", root, nb, root, 0o1777, false},
		{"the directory owner's, for another user", nb, other, other, 0o755, true},
		{"in /tmp, for another user", nb, other, root, 0o1777, false},
		{"in a third user's directory", nb, other, 2000, 0o777, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, trustLink(tt.writer, tt.link, tt.dirUID, tt.dirMode), tt.name)
	}
}
