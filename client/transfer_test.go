package client_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/server"
)

// onlyReader hides everything of a reader but Read: its size is unknown.
type onlyReader struct{ io.Reader }

func TestUploadDownload(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	dir := t.TempDir()
	data := make([]byte, 5<<20+7)
	_, _ = rand.Read(data)
	local := filepath.Join(t.TempDir(), "src.bin")
	require.NoError(t, os.WriteFile(local, data, 0o600))

	f, err := os.Open(local)
	require.NoError(t, err)
	defer f.Close()
	remote := filepath.Join(dir, "deep", "up.bin")
	res, err := a.c.Upload(ctx, remote, f, nil) // a file: its size is sent, with Expect: 100-continue
	require.NoError(t, err)
	assert.Equal(t, client.UploadResult{Path: remote, Size: int64(len(data)), Created: true}, res)

	var buf bytes.Buffer
	d, err := a.c.Download(ctx, remote, &buf, nil)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, buf.Bytes()))
	assert.Equal(t, int64(len(data)), d.Size)
	assert.Equal(t, int64(len(data)), d.Written)
	assert.Zero(t, d.Offset)
	assert.NotEmpty(t, d.ETag)
	assert.False(t, d.ModTime.IsZero())

	// Chunked, gzipped, with a mode: replaced.
	res, err = a.c.Upload(ctx, remote, onlyReader{bytes.NewReader(data[:1000])}, &client.UploadOptions{Gzip: true, Mode: 0o640})
	require.NoError(t, err)
	assert.Equal(t, client.UploadResult{Path: remote, Size: 1000}, res)
	fi, err := os.Stat(remote)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())

	// Resuming an upload: HeadFile says where.
	meta, err := a.c.HeadFile(ctx, remote)
	require.NoError(t, err)
	assert.Equal(t, int64(1000), meta.Size)
	res, err = a.c.Upload(ctx, remote, bytes.NewReader(data[1000:3000]), &client.UploadOptions{WriteAt: true, Offset: meta.Size})
	require.NoError(t, err)
	assert.Equal(t, int64(3000), res.Size)
	res, err = a.c.Upload(ctx, remote, strings.NewReader("tail"), &client.UploadOptions{Append: true})
	require.NoError(t, err)
	assert.Equal(t, int64(3004), res.Size)
	got, err := os.ReadFile(remote)
	require.NoError(t, err)
	assert.Equal(t, append(bytes.Clone(data[:3000]), "tail"...), got)

	// Ranges, and resuming a download.
	buf.Reset()
	d, err = a.c.Download(ctx, remote, &buf, &client.DownloadOptions{Offset: 100, Length: 50})
	require.NoError(t, err)
	assert.Equal(t, data[100:150], buf.Bytes())
	assert.Equal(t, int64(100), d.Offset)
	assert.Equal(t, int64(3004), d.Size, "the whole file's size")
	buf.Reset()
	d, err = a.c.Download(ctx, remote, &buf, &client.DownloadOptions{Offset: 3000, IfRange: meta.ETag})
	require.NoError(t, err)
	assert.Zero(t, d.Offset, "the file changed since that ETag: all of it came")
	assert.Equal(t, 3004, buf.Len())
	buf.Reset()
	d, err = a.c.Download(ctx, remote, &buf, &client.DownloadOptions{Offset: 3000, IfRange: d.ETag})
	require.NoError(t, err)
	assert.Equal(t, int64(3000), d.Offset)
	assert.Equal(t, "tail", buf.String())
}

func TestTransferErrors(t *testing.T) {
	a := startAgent(t, agentConfig{server: server.Config{MaxUpload: 4096}})
	ctx := t.Context()
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := a.c.Download(ctx, missing, io.Discard, nil)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusNotFound, ae.StatusCode)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = a.c.HeadFile(ctx, missing)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusNotFound, ae.StatusCode)

	for _, r := range []io.Reader{bytes.NewReader(make([]byte, 5000)), onlyReader{bytes.NewReader(make([]byte, 5000))}} {
		_, err = a.c.Upload(ctx, missing, r, nil)
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusRequestEntityTooLarge, ae.StatusCode)
		assert.Equal(t, map[string]any{"max_bytes": float64(4096)}, ae.Details)
	}
	_, err = a.c.Upload(ctx, t.TempDir(), strings.NewReader("x"), nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusConflict, ae.StatusCode)
	assert.True(t, strings.HasSuffix(ae.Message, ": is a directory"), ae.Message)
	assert.NoFileExists(t, missing)
}

func TestArchives(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a", "b", "f.txt"), []byte("hello"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "top"), []byte("top"), 0o755))
	require.NoError(t, os.Symlink("a/b/f.txt", filepath.Join(src, "link")))

	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		n, err := a.c.DownloadArchive(ctx, src, &buf, gz)
		require.NoError(t, err)
		assert.Equal(t, int64(buf.Len()), n)
		dst := filepath.Join(t.TempDir(), "copy")
		x, err := a.c.ExtractArchive(ctx, dst, &buf, gz)
		require.NoError(t, err)
		assert.Equal(t, client.Extracted{Path: dst, Entries: 5, Size: 8, Created: true}, x)
		out, err := exec.Command("diff", "-r", "--no-dereference", src, dst).CombinedOutput()
		assert.NoError(t, err, "%s", out)
	}

	_, err := a.c.ExtractArchive(ctx, t.TempDir(), strings.NewReader("not a tar archive, not at all, no"), false)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.Message, "invalid archive")
}

// truncateAfter writes to w and, once n bytes have gone, truncates the
// file at path: the tree changes under the agent's archive.
type truncateAfter struct {
	w    io.Writer
	n    int
	path string
	err  error
}

func (t *truncateAfter) Write(p []byte) (int, error) {
	if t.n > 0 && t.n <= len(p) {
		t.err = os.Truncate(t.path, 0)
	}
	t.n -= len(p)
	return t.w.Write(p)
}

// A tree that changes while it is archived is an error, never a whole
// archive.
func TestDownloadArchiveCut(t *testing.T) {
	a := startAgent(t, agentConfig{})
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	data := make([]byte, 32<<20) // random: the agent cannot run far ahead of the reader
	_, _ = rand.Read(data)
	require.NoError(t, os.WriteFile(big, data, 0o644))
	w := &truncateAfter{w: io.Discard, n: 64 << 10, path: big}
	_, err := a.c.DownloadArchive(t.Context(), dir, w, false)
	require.NoError(t, w.err)
	require.Error(t, err)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Contains(t, err.Error(), "the archive is incomplete")
	assert.False(t, errors.Is(err, fs.ErrNotExist))
}
