package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// quadraticArchive builds what an attacker would send to make a link
// check costly: n symbolic links deep in a chain of directories, each
// leading up the whole chain, down again and to the link before it, so
// that following one follows them all. About 70 KB gzipped for n=2000; the old check took over 3 s for n=100.
func quadraticArchive(t *testing.T, n int) []byte {
	t.Helper()
	const depth = 600
	deep := strings.Repeat("d/", depth)
	up := strings.Repeat("../", depth)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: deep, Typeflag: tar.TypeDir, Mode: 0o755}))
	for i := range n {
		target := up + deep + fmt.Sprintf("l%d", i-1)
		if i == 0 {
			target = up + deep
		}
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: deep + fmt.Sprintf("l%d", i), Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}))
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// The quadratic archive is answered at once: the link check is linear.
func TestExtractQuadraticLinks(t *testing.T) {
	archive := quadraticArchive(t, 2000)
	t.Logf("archive: %d bytes gzipped", len(archive))
	// On a tmpfs, so that the disk of a busy machine is not what is timed.
	dir := filepath.Join(mountTmpfs(t, "256m"), "dst")
	done := make(chan error, 1)
	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // ends when Extract returns, at the latest once ctx is cancelled
		_, err := Extract(ctx, dir, bytes.NewReader(archive), ExtractOptions{Gzip: true})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
		t.Logf("placed in %s", time.Since(start))
	case <-time.After(3 * time.Second):
		cancel()
		<-done
		t.Fatalf("not answered within 3 s")
	}
	target, err := os.Readlink(filepath.Join(dir, strings.Repeat("d/", 600), "l1999"))
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(target, "/l1998"))
}

// sparseTar makes, with GNU tar, an archive of one sparse file of 1 GiB
// holding only "head" at its start and "tail" at its end.
func sparseTar(t *testing.T) []byte {
	t.Helper()
	if out, err := exec.Command("tar", "--version").Output(); err != nil || !bytes.Contains(out, []byte("GNU tar")) {
		t.Skip("needs GNU tar (Debian's tar package) to make a sparse archive")
	}
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "sparse.bin"))
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("head"), 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("tail"), 1<<30-4)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, err := exec.Command("tar", "--sparse", "-C", src, "-cf", "-", "sparse.bin").Output()
	require.NoError(t, err)
	return out
}

// A sparse file stays sparse: its holes are not written, and do not count
// against the limit.
func TestExtractSparse(t *testing.T) {
	archive := sparseTar(t)
	require.Less(t, len(archive), 16<<10, "a small archive")
	dir := filepath.Join(t.TempDir(), "dst")
	res, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{Limit: 1 << 20})
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), res.Size)
	p := filepath.Join(dir, "sparse.bin")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), fi.Size())
	blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512 // what du counts
	assert.Less(t, blocks, int64(1<<20), "holes are not written")
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 4)
	_, err = f.ReadAt(b, 0)
	require.NoError(t, err)
	assert.Equal(t, "head", string(b))
	_, err = f.ReadAt(b, 1<<30-4)
	require.NoError(t, err)
	assert.Equal(t, "tail", string(b))
}

// An archive whose files hold more than the limit (a bomb: 50 MB of zeros
// in 50 KB of gzip, or many small files) is refused, naming the limit,
// and nothing is placed.
func TestExtractLimit(t *testing.T) {
	var many []ent
	for i := range 300 {
		many = append(many, ent{name: fmt.Sprintf("f%d", i), body: strings.Repeat("x", 4000)})
	}
	for name, archive := range map[string][]byte{
		"bomb":  mkTar(t, true, ent{name: "ok", body: "1"}, ent{name: "zeros", body: string(make([]byte, 50<<20))}),
		"files": mkTar(t, true, many...),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "bomb" {
				require.Less(t, len(archive), 100<<10)
			}
			for _, exists := range []bool{false, true} {
				dir := filepath.Join(t.TempDir(), "dst")
				if exists {
					require.NoError(t, os.Mkdir(dir, 0o755))
				}
				before := snapshot(t, dir)
				_, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{Gzip: true, Limit: 1 << 20})
				require.ErrorIs(t, err, ErrArchiveTooLarge)
				assert.EqualError(t, err, "archive too large: its files hold more than the limit of 1048576 bytes")
				assert.Equal(t, before, snapshot(t, dir), "nothing placed, nothing left")
			}
		})
	}
	res, err := Extract(t.Context(), filepath.Join(t.TempDir(), "dst"), bytes.NewReader(mkTar(t, false, many[:200]...)), ExtractOptions{Limit: 800_000})
	require.NoError(t, err, "exactly the limit")
	assert.Equal(t, int64(800_000), res.Size)
}

// Past the count of entries, or the time, Extract stops, naming the limit,
// and nothing is placed.
func TestExtractCountAndTimeLimits(t *testing.T) {
	var ents []ent
	for i := range 5 {
		ents = append(ents, ent{name: fmt.Sprintf("f%d", i), body: "x"})
	}
	archive := mkTar(t, false, ents...)
	dir := filepath.Join(t.TempDir(), "dst")
	_, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{MaxEntries: 3})
	require.ErrorIs(t, err, ErrArchiveTooManyEntries)
	assert.EqualError(t, err, "archive has too many entries: more than the limit of 3")
	assert.NoDirExists(t, dir)

	_, err = Extract(t.Context(), dir, &slowReader{r: bytes.NewReader(archive), after: 1024, wait: 200 * time.Millisecond},
		ExtractOptions{Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrArchiveTimeout)
	assert.EqualError(t, err, "archive took too long to unpack: more than the limit of 50ms")
	assert.NoDirExists(t, dir)
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(dir)))
}

// slowReader reads r, but waits once, for wait, after the first after
// bytes: a client that stalls.
type slowReader struct {
	r     io.Reader
	after int
	wait  time.Duration
	n     int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n >= s.after && s.wait > 0 {
		<-time.After(s.wait)
		s.wait = 0
	}
	p = p[:min(len(p), max(s.after-s.n, 1))]
	n, err := s.r.Read(p)
	s.n += n
	return n, err
}

// cancelAtEnd reads r and calls cancel as it hands out r's last byte: the
// client left just as the whole archive had arrived.
type cancelAtEnd struct {
	r      *bytes.Reader
	cancel func()
}

func (c cancelAtEnd) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.r.Len() == 0 {
		c.cancel()
	}
	return n, err
}

// Nothing is placed once ctx is done, even if the whole archive was read.
func TestExtractCancelledAsTheArchiveEnds(t *testing.T) {
	for _, exists := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "dst")
		if exists {
			require.NoError(t, os.Mkdir(dir, 0o755))
		}
		before := snapshot(t, dir)
		ctx, cancel := context.WithCancel(t.Context())
		archive := mkTar(t, false, ent{name: "a", body: "a"}, ent{name: "d/", typ: tar.TypeDir}, ent{name: "d/b", body: "b"})
		_, err := Extract(ctx, dir, cancelAtEnd{bytes.NewReader(archive), cancel}, ExtractOptions{})
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, before, snapshot(t, dir), "nothing placed, nothing left")
	}
}

// Two archives, each accepted on its own, must not build a link that
// leads out: "x/a -> b/../.." (b missing: inside), then "x/b -> .".
func TestExtractLinksAcrossArchives(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dst")
	_, err1 := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, false,
		ent{name: "x/", typ: tar.TypeDir}, ent{name: "x/a", typ: tar.TypeSymlink, link: "b/../.."})), ExtractOptions{})
	_, err2 := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, false,
		ent{name: "x/", typ: tar.TypeDir}, ent{name: "x/b", typ: tar.TypeSymlink, link: "."})), ExtractOptions{})
	require.ErrorIs(t, errors.Join(err1, err2), ErrBadArchive, "one of them is refused")
	assert.EqualError(t, err1, `invalid archive: entry "x/a": a symbolic link to "b/../..", with a .. element after a name: where it leads depends on what that name is, or may become`)
	assertLinksInside(t, dir)
}

// assertLinksInside checks that every symbolic link under dir that
// resolves leads to dir or below it.
func assertLinksInside(t *testing.T, dir string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		if to, err := filepath.EvalSymlinks(p); err == nil {
			assert.True(t, within(real, to), "%s leads to %s, outside %s", p, to, real)
		}
		return nil
	}))
}

// The link rule, case by case: where a link sits bounds how far up it may
// go; a .. after a name is refused.
func TestExtractLinkRule(t *testing.T) {
	tests := []struct {
		name, target string
		ok           bool
	}{
		{"l", "a", true},
		{"l", "./a/./b", true},
		{"l", "..", false},
		{"d/l", "..", true},
		{"d/l", "../..", false},
		{"d/e/l", "../../x/y", true},
		{"d/e/l", "../x/../y", false},
		{"l", "a/..", false},
		{"l", "/DEST/a", true},
		{"l", "/DEST", true},
		{"l", "/DEST/a/../b", false},
		{"l", "/DEST/../x", false},
		{"l", "/etc", false},
	}
	for _, tt := range tests {
		dir := filepath.Join(t.TempDir(), "dst")
		target := strings.ReplaceAll(tt.target, "/DEST", dir)
		ents := []ent{{name: "d/e/", typ: tar.TypeDir}, {name: tt.name, typ: tar.TypeSymlink, link: target}}
		_, err := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, false, ents...)), ExtractOptions{})
		if tt.ok {
			assert.NoError(t, err, "%s -> %s", tt.name, tt.target)
		} else {
			assert.ErrorIs(t, err, ErrBadArchive, "%s -> %s", tt.name, tt.target)
		}
	}
}
