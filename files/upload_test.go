package files

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// mountTmpfs mounts a tmpfs of the given size (such as "1m") on a new
// temporary directory and returns it; it is unmounted when the test ends.
// The test is skipped where the process may not mount (not root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestWriteAtomicCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "f.txt")

	w, err := WriteAtomic(t.Context(), p, strings.NewReader("one"), WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, Written{Path: p, Size: 3, Created: true}, w, "parents are created")
	assert.Equal(t, fs.FileMode(0o644), mode(t, p))
	assert.Equal(t, fs.FileMode(0o755), mode(t, filepath.Dir(p)))

	require.NoError(t, os.Chmod(p, 0o600))
	w, err = WriteAtomic(t.Context(), p, strings.NewReader("second"), WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, Written{Path: p, Size: 6, Created: false}, w)
	assert.Equal(t, fs.FileMode(0o600), mode(t, p), "a replaced file keeps its mode")

	_, err = WriteAtomic(t.Context(), p, strings.NewReader(""), WriteOptions{Mode: 0o750})
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o750), mode(t, p), "unless one is given")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(p)))
}

// A link is followed, as open(2) follows it: the file it leads to is
// replaced, and the link stays.
func TestWriteAtomicFollowsLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.txt")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o640))
	link := filepath.Join(dir, "link.txt")
	require.NoError(t, os.Symlink("real.txt", link))

	w, err := WriteAtomic(t.Context(), link, strings.NewReader("new"), WriteOptions{})
	require.NoError(t, err)
	assert.False(t, w.Created)
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSymlink, fi.Mode().Type(), "the link is still a link")
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	assert.Equal(t, fs.FileMode(0o640), mode(t, target))

	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink("sub/made.txt", dangling))
	w, err = WriteAtomic(t.Context(), dangling, strings.NewReader("x"), WriteOptions{})
	require.NoError(t, err)
	assert.True(t, w.Created)
	assert.FileExists(t, filepath.Join(dir, "sub", "made.txt"))
}

// errAfter is a reader that gives n bytes, then err.
type errAfter struct {
	n   int
	err error
}

func (r *errAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// Whatever ends an upload early, the old file is as it was and nothing
// else is left.
func TestWriteAtomicFailureLeavesOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	cut := errors.New("the client left")

	_, err := WriteAtomic(t.Context(), p, &errAfter{n: 3 << 20, err: cut}, WriteOptions{})
	assert.ErrorIs(t, err, cut, "the source's error, as it gave it")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = WriteAtomic(ctx, p, strings.NewReader("new"), WriteOptions{})
	assert.ErrorIs(t, err, context.Canceled)

	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	assert.Empty(t, testutil.Leftovers(t, dir))
}

func TestWriteAtomicRefuses(t *testing.T) {
	dir := t.TempDir()
	_, err := WriteAtomic(t.Context(), dir, strings.NewReader("x"), WriteOptions{})
	assert.ErrorIs(t, err, syscall.EISDIR)
	assert.EqualError(t, err, "open "+dir+": is a directory")

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err = WriteAtomic(t.Context(), fifo, strings.NewReader("x"), WriteOptions{})
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.EqualError(t, err, "write "+fifo+": named pipes and sockets cannot be written")

	_, err = WriteAtomic(t.Context(), "/dev/null", strings.NewReader("x"), WriteOptions{})
	assert.ErrorIs(t, err, ErrNotRegular)

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = WriteAtomic(t.Context(), filepath.Join(file, "x"), strings.NewReader("x"), WriteOptions{})
	assert.ErrorIs(t, err, syscall.ENOTDIR, "a parent that is a file")
	assert.Empty(t, testutil.Leftovers(t, dir))
}

// A full disk is ErrNoSpace, in the system's words, and leaves nothing.
func TestWriteAtomicNoSpace(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	_, err := WriteAtomic(t.Context(), p, &errAfter{n: 4 << 20, err: io.EOF}, WriteOptions{})
	require.ErrorIs(t, err, ErrNoSpace)
	assert.EqualError(t, err, "write "+p+": no space left on device")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	assert.Empty(t, testutil.Leftovers(t, dir))

	free, err := FreeSpace(dir)
	require.NoError(t, err)
	assert.InDelta(t, 1<<20, free, 64<<10, "the tmpfs is empty again")
}

// Staged files appear only on Commit; Discard leaves nothing.
func TestStageCommitDiscard(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	sa, err := Stage(t.Context(), a, strings.NewReader("aa"), WriteOptions{})
	require.NoError(t, err)
	sb, err := Stage(t.Context(), b, strings.NewReader("bbb"), WriteOptions{})
	require.NoError(t, err)
	assert.NoFileExists(t, a)
	assert.Len(t, testutil.Leftovers(t, dir), 2)
	sb.Discard()
	w, err := sa.Commit()
	require.NoError(t, err)
	assert.Equal(t, Written{Path: a, Size: 2, Created: true}, w)
	assert.NoFileExists(t, b)
	assert.Empty(t, testutil.Leftovers(t, dir))
}

func TestWriteAt(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "log")

	w, err := WriteAt(t.Context(), p, strings.NewReader("hello"), AtEnd, WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, Written{Path: p, Size: 5, Created: true}, w)
	w, err = WriteAt(t.Context(), p, strings.NewReader(" world"), AtEnd, WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, Written{Path: p, Size: 11}, w)

	w, err = WriteAt(t.Context(), p, strings.NewReader("J"), 6, WriteOptions{Mode: 0o600})
	require.NoError(t, err)
	assert.Equal(t, Written{Path: p, Size: 11}, w, "what follows is kept")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "hello Jorld", string(got))
	assert.Equal(t, fs.FileMode(0o600), mode(t, p))

	w, err = WriteAt(t.Context(), p, strings.NewReader("!"), 11, WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(12), w.Size, "at the end is resuming")

	_, err = WriteAt(t.Context(), p, strings.NewReader("x"), 13, WriteOptions{})
	assert.ErrorIs(t, err, ErrOffset)
	assert.EqualError(t, err, "write "+p+": offset past the end of the file (offset 13, size 12)")
	missing := filepath.Join(dir, "missing")
	_, err = WriteAt(t.Context(), missing, strings.NewReader("x"), 1, WriteOptions{})
	assert.ErrorIs(t, err, ErrOffset)
	assert.NoFileExists(t, missing, "nothing is created for a refused offset")

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err = WriteAt(t.Context(), fifo, strings.NewReader("x"), AtEnd, WriteOptions{})
	assert.ErrorIs(t, err, ErrNotRegular)
}

func TestJoinBase(t *testing.T) {
	for name, want := range map[string]string{
		"a.txt": "/d/a.txt", "../x": "/d/x", "/etc/passwd": "/d/passwd", `C:\Users\me\b.bin`: "/d/b.bin",
		"a/b/../c": "/d/c", "..\\..\\y": "/d/y", "ünï cødé.txt": "/d/ünï cødé.txt",
	} {
		got, err := JoinBase("/d", name)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"", ".", "..", "a/", "x/..", `c:\`} {
		_, err := JoinBase("/d", name)
		assert.ErrorIs(t, err, ErrInvalidPath, name)
	}
}

func TestCopyToNoSpaceIsMarked(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = copyTo(t.Context(), f, "/dev/full", bytes.NewReader([]byte("x")))
	assert.ErrorIs(t, err, ErrNoSpace)
	assert.ErrorIs(t, err, syscall.ENOSPC)
}
