package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// archiveTree makes a tree with files of several modes, nested and empty
// directories, a link inside, a link outside, a named pipe and a socket.
func archiveTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	must(os.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "empty"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "deep", "b.bin"), bytes.Repeat([]byte{0, 1, 2, 255}, 40_000), 0o600))
	must(os.Symlink("../a.txt", filepath.Join(dir, "sub", "to-a")))
	must(os.Symlink("/etc", filepath.Join(dir, "etc-link")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	must(err)
	t.Cleanup(func() { ln.Close() })
	for _, p := range []string{"sub", "sub/deep", "empty"} { // whatever the umask
		fi, err := os.Stat(filepath.Join(dir, p))
		must(err)
		must(os.Chmod(filepath.Join(dir, p), fi.Mode().Perm()|0o700))
	}
	must(os.Chmod(filepath.Join(dir, "empty"), 0o700))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(dir, "a.txt"), old, old))
	return dir
}

// listArchive reads a whole archive and returns its entries by name, and
// the contents of its files.
func listArchive(t *testing.T, b []byte, gz bool) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	var r io.Reader = bytes.NewReader(b)
	if gz {
		zr, err := gzip.NewReader(r)
		require.NoError(t, err)
		r = zr
	}
	tr := tar.NewReader(r)
	hdrs, bodies := map[string]*tar.Header{}, map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, bodies
		}
		require.NoError(t, err)
		hdrs[hdr.Name] = hdr
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		bodies[hdr.Name] = string(body)
	}
}

func TestWriteArchive(t *testing.T) {
	dir := archiveTree(t)
	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		require.NoError(t, WriteArchive(t.Context(), &buf, dir, ArchiveOptions{Gzip: gz}))
		hdrs, bodies := listArchive(t, buf.Bytes(), gz)
		names := make([]string, 0, len(hdrs))
		for n := range hdrs {
			names = append(names, n)
		}
		sort.Strings(names)
		assert.Equal(t, []string{"a.txt", "empty/", "etc-link", "fifo", "run.sh", "sub/", "sub/deep/", "sub/deep/b.bin", "sub/to-a"}, names,
			"names relative to the directory; the socket left out; the link to /etc not followed")
		assert.Equal(t, "hello\n", bodies["a.txt"])
		assert.Equal(t, int64(0o644), hdrs["a.txt"].Mode&0o777)
		assert.Equal(t, time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC), hdrs["a.txt"].ModTime.UTC())
		assert.Equal(t, int64(0o755), hdrs["run.sh"].Mode&0o777)
		assert.Equal(t, 160_000, len(bodies["sub/deep/b.bin"]))
		assert.Equal(t, byte(tar.TypeSymlink), hdrs["etc-link"].Typeflag)
		assert.Equal(t, "/etc", hdrs["etc-link"].Linkname)
		assert.Equal(t, "../a.txt", hdrs["sub/to-a"].Linkname)
		assert.Equal(t, byte(tar.TypeFifo), hdrs["fifo"].Typeflag, "stored, never opened")
		assert.Equal(t, byte(tar.TypeDir), hdrs["empty/"].Typeflag)
		assert.Equal(t, int64(0o700), hdrs["empty/"].Mode&0o777)
	}
}

// A root given as a link to a directory is followed: the caller named it.
func TestWriteArchiveRootLink(t *testing.T) {
	dir := archiveTree(t)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	var buf bytes.Buffer
	require.NoError(t, WriteArchive(t.Context(), &buf, link, ArchiveOptions{}))
	hdrs, _ := listArchive(t, buf.Bytes(), false)
	assert.Contains(t, hdrs, "sub/deep/b.bin")
}

// onFirstHeader keeps what is written to it and calls hook with the name
// of the first entry, once its header is written and before its content.
type onFirstHeader struct {
	bytes.Buffer
	hook func(name string)
}

func (w *onFirstHeader) Write(p []byte) (int, error) {
	if w.hook != nil && len(p) >= 512 { // tar.Writer writes a header whole
		hook := w.hook
		w.hook = nil
		hook(string(bytes.TrimRight(p[:100], "\x00")))
	}
	return w.Buffer.Write(p)
}

// A tree that changes under the archive ends it with ErrArchiveSource,
// naming the entry, and what was written is a cut archive, never a whole
// one.
func TestWriteArchiveSourceErrors(t *testing.T) {
	t.Run("vanished", func(t *testing.T) {
		dir := t.TempDir()
		names := []string{"a", "b", "c"}
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644))
		}
		// The three names are listed before the first is archived; once it
		// is, the others go.
		w := &onFirstHeader{hook: func(first string) {
			for _, n := range names {
				if n != first {
					require.NoError(t, os.Remove(filepath.Join(dir, n)))
				}
			}
		}}
		err := WriteArchive(t.Context(), w, dir, ArchiveOptions{})
		require.ErrorIs(t, err, ErrArchiveSource)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.Regexp(t, `^the tree could not be archived: lstat .*/[abc]: no such file or directory$`, err.Error())
		n, err := listCut(t, w.Bytes())
		assert.Equal(t, 1, n, "the first file, then the cut")
		assert.ErrorIs(t, err, tar.ErrHeader, "the block after it is not a header")
		assert.Contains(t, w.String(), "sandbox-executor: archive incomplete: the tree could not be archived: lstat ")
	})
	t.Run("shrank", func(t *testing.T) {
		dir := t.TempDir()
		big := filepath.Join(dir, "big")
		require.NoError(t, os.WriteFile(big, make([]byte, 1<<20), 0o644))
		w := &onFirstHeader{hook: func(string) { require.NoError(t, os.Truncate(big, 100)) }}
		err := WriteArchive(t.Context(), w, dir, ArchiveOptions{Gzip: false})
		require.ErrorIs(t, err, ErrArchiveSource)
		assert.EqualError(t, err, "the tree could not be archived: read "+big+": the file shrank by 1048476 bytes while it was archived")
		listCut(t, w.Bytes())
	})
}

// listCut reads an archive that must be cut: tar reports it.
func listCut(t *testing.T, b []byte) (int, error) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	n := 0
	for {
		_, err := tr.Next()
		if err == nil {
			if _, err = io.Copy(io.Discard, tr); err == nil {
				n++
				continue
			}
		}
		require.NotErrorIs(t, err, io.EOF, "a cut archive read as a whole one")
		return n, err
	}
}
