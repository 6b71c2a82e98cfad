package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// An archive that unpacks past the upload limit (50 MB of zeros in 50 KB
// of gzip, under a 1 MiB limit) is a 413 naming the limit, and nothing is
// placed.
func TestFilesPutExtractBomb(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxUpload: 1 << 20}, runner: &executor.Runner{}})
	bomb := mkTarball(t, true, "ok", "1", "zeros", string(make([]byte, 50<<20)))
	require.Less(t, len(bomb), 100<<10)
	dir := filepath.Join(t.TempDir(), "proj")
	resp := fileReq(t, ts, "PUT", filesURL(dir, "extract", "tar.gz"), bytes.NewReader(bomb))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, map[string]any{"error": "archive too large: its files hold more than the limit of 1048576 bytes",
		"max_bytes": float64(1 << 20)}, jsonReply(t, resp))
	assert.NoDirExists(t, dir)
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(dir)))
}

// The count and time limits of extraction are a 400 and a 408 naming
// them, and nothing is placed.
func TestFilesPutExtractLimits(t *testing.T) {
	archive := mkTarball(t, false, "a", "1", "b", "2", "c", "3")
	for _, tt := range []struct {
		cfg  Config
		code int
		want string
	}{
		{Config{ExtractEntries: 2}, http.StatusBadRequest, "archive has too many entries: more than the limit of 2"},
		{Config{ExtractTimeout: time.Nanosecond}, http.StatusRequestTimeout, "archive took too long to unpack: more than the limit of 1ns"},
	} {
		ts, _ := newTestServer(t, testServer{cfg: tt.cfg, runner: &executor.Runner{}})
		dir := filepath.Join(t.TempDir(), "proj")
		resp := fileReq(t, ts, "PUT", filesURL(dir, "extract", "tar"), bytes.NewReader(archive))
		assert.Equal(t, tt.code, resp.StatusCode)
		assert.Equal(t, map[string]any{"error": tt.want}, jsonReply(t, resp))
		assert.NoDirExists(t, dir)
		assert.Empty(t, testutil.Leftovers(t, filepath.Dir(dir)))
	}
}

// A client that leaves mid-upload gets nothing placed, and nothing is left.
func TestFilesPutExtractClientLeaves(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := filepath.Join(t.TempDir(), "proj")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i := range 20 {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d", i), Mode: 0o644, Size: 100_000, Typeflag: tar.TypeReg}))
		_, err := tw.Write(pattern(100_000, byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	archive := buf.Bytes()

	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "PUT", ts.URL+filesURL(dir, "extract", "tar.gz"), pr)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	done := make(chan error, 1)
	go func() { // the client; it ends when the request fails, once cancelled
		resp, err := ts.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	_, err = pw.Write(archive[:len(archive)/2])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(testutil.Leftovers(t, filepath.Dir(dir))) > 0 },
		5*time.Second, 10*time.Millisecond, "the extraction started")
	cancel()
	pw.CloseWithError(context.Canceled) // the transport's writer may be waiting on the pipe
	require.Error(t, <-done)
	require.Eventually(t, func() bool { return len(testutil.Leftovers(t, filepath.Dir(dir))) == 0 },
		5*time.Second, 10*time.Millisecond, "the temporary directory is removed")
	assert.NoDirExists(t, dir, "nothing placed")
}
