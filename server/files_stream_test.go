package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/files"
)

// filesURL is the path of /files with the query q.
func filesURL(path string, q ...string) string {
	v := url.Values{"path": {path}}
	for i := 0; i+1 < len(q); i += 2 {
		v.Add(q[i], q[i+1])
	}
	return "/files?" + v.Encode()
}

// fileReq sends a request to the test server with the test secret and
// the headers given as name, value pairs.
func fileReq(t *testing.T, ts *httptest.Server, method, target string, body io.Reader, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+target, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// bodyOf reads a reply's body to its end.
func bodyOf(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// jsonReply reads a JSON reply's body.
func jsonReply(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(bodyOf(t, resp), &m))
	return m
}

// pattern returns n bytes in which every 4 KiB block differs.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/4096) ^ byte(i) ^ seed
	}
	return b
}

func TestFilesDownload(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	p := filepath.Join(dir, "notes.txt")
	data := pattern(10_000, 7)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	fi, err := os.Stat(p)
	require.NoError(t, err)

	resp := fileReq(t, ts, "GET", filesURL(p), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, data, bodyOf(t, resp))
	assert.Equal(t, "10000", resp.Header.Get("Content-Length"))
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"), "by extension")
	assert.Equal(t, fi.ModTime().UTC().Format(http.TimeFormat), resp.Header.Get("Last-Modified"))
	assert.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))
	assert.Regexp(t, `^"[0-9a-f]+-[0-9a-f]+-2710-[0-9a-f]+"$`, resp.Header.Get("ETag"), "device, inode, size (hex), mtime")
	assert.Empty(t, resp.Header.Get("Content-Disposition"))
	tag := resp.Header.Get("ETag")

	png := filepath.Join(dir, "image")
	require.NoError(t, os.WriteFile(png, append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...), 0o644))
	resp = fileReq(t, ts, "GET", filesURL(png), nil)
	assert.Equal(t, "image/png", resp.Header.Get("Content-Type"), "sniffed without an extension")

	resp = fileReq(t, ts, "HEAD", filesURL(p), nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int64(10_000), resp.ContentLength)
	assert.Equal(t, tag, resp.Header.Get("ETag"))
	assert.Empty(t, bodyOf(t, resp))

	// The ETag changes with the content, even at the same size.
	require.NoError(t, os.WriteFile(p+".new", pattern(10_000, 8), 0o644))
	require.NoError(t, os.Rename(p+".new", p))
	resp = fileReq(t, ts, "HEAD", filesURL(p), nil)
	assert.NotEqual(t, tag, resp.Header.Get("ETag"))
}

func TestFilesRanges(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "blob.bin")
	data := pattern(1000, 3)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	tag := fileReq(t, ts, "HEAD", filesURL(p), nil).Header.Get("ETag")
	lastMod := fileReq(t, ts, "HEAD", filesURL(p), nil).Header.Get("Last-Modified")

	resp := fileReq(t, ts, "GET", filesURL(p), nil, "Range", "bytes=100-199")
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, data[100:200], bodyOf(t, resp))
	assert.Equal(t, "bytes 100-199/1000", resp.Header.Get("Content-Range"))

	resp = fileReq(t, ts, "GET", filesURL(p), nil, "Range", "bytes=-10")
	assert.Equal(t, data[990:], bodyOf(t, resp), "a suffix")

	resp = fileReq(t, ts, "GET", filesURL(p), nil, "Range", "bytes=0-9,500-509")
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, "multipart/byteranges", mt)
	mr := multipart.NewReader(resp.Body, params["boundary"])
	for _, want := range []struct {
		cr   string
		body []byte
	}{{"bytes 0-9/1000", data[:10]}, {"bytes 500-509/1000", data[500:510]}} {
		part, err := mr.NextPart()
		require.NoError(t, err)
		assert.Equal(t, want.cr, part.Header.Get("Content-Range"))
		b, err := io.ReadAll(part)
		require.NoError(t, err)
		assert.Equal(t, want.body, b)
	}

	resp = fileReq(t, ts, "GET", filesURL(p), nil, "Range", "bytes=5000-")
	assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)
	assert.Equal(t, "bytes */1000", resp.Header.Get("Content-Range"))
	assert.Equal(t, map[string]any{"error": "invalid range: failed to overlap"}, jsonReply(t, resp))

	// Conditional requests.
	resp = fileReq(t, ts, "GET", filesURL(p), nil, "If-None-Match", tag)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	assert.Empty(t, bodyOf(t, resp))
	resp = fileReq(t, ts, "GET", filesURL(p), nil, "If-Modified-Since", lastMod)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	resp = fileReq(t, ts, "GET", filesURL(p), nil, "If-None-Match", `"other"`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp = fileReq(t, ts, "GET", filesURL(p), nil, "Range", "bytes=10-19", "If-Range", tag)
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode, "the file still matches")
	resp = fileReq(t, ts, "GET", filesURL(p), nil, "Range", "bytes=10-19", "If-Range", `"stale"`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the file changed: all of it")
	assert.Equal(t, data, bodyOf(t, resp))
	resp = fileReq(t, ts, "GET", filesURL(p), nil, "If-Match", `"stale"`)
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	assert.Equal(t, map[string]any{"error": "precondition failed: the file does not match If-Match or If-Unmodified-Since"}, jsonReply(t, resp))
}

func TestFilesContentDisposition(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	for name, want := range map[string]string{
		"report.pdf":   `attachment; filename=report.pdf`,
		"a b.txt":      `attachment; filename="a b.txt"`,
		`q"uo\te.txt`:  `attachment; filename="q\"uo\\te.txt"`,
		"ünï cødé.txt": `attachment; filename="__n__ c__d__.txt"; filename*=utf-8''%C3%BCn%C3%AF%20c%C3%B8d%C3%A9.txt`,
		"line\nbreak":  `attachment; filename=line_break; filename*=utf-8''line%0Abreak`,
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		resp := fileReq(t, ts, "GET", filesURL(p, "download", "1"), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, name)
		cd := resp.Header.Get("Content-Disposition")
		assert.Equal(t, want, cd, name)
		mt, params, err := mime.ParseMediaType(cd)
		require.NoError(t, err, name)
		assert.Equal(t, "attachment", mt)
		assert.Equal(t, name, params["filename"], "a parser gets the exact name back")
	}
}

func TestFilesDownloadErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		target string
		code   int
		msg    string
	}{
		{filesURL(missing), 404, "open " + missing + ": no such file or directory"},
		{filesURL(fifo), 400, "read " + fifo + ": named pipes and sockets cannot be read"},
		{filesURL("/dev/null"), 400, "read /dev/null: devices cannot be read"},
		{filesURL(dir), 400, dir + " is a directory: download it as an archive with format=tar or format=tar.gz"},
		{filesURL(file, "format", "tar"), 400, "format=tar is for directories, and " + file + " is a file"},
		{filesURL(dir, "format", "zip"), 400, `format must be tar or tar.gz, not "zip"`},
		{filesURL(file, "download", "maybe"), 400, `download must be a boolean such as 1 or true, not "maybe"`},
		{"/files", 400, "path is required"},
	}
	for _, tt := range tests {
		resp := fileReq(t, ts, "GET", tt.target, nil)
		assert.Equal(t, tt.code, resp.StatusCode, tt.target)
		assert.Equal(t, map[string]any{"error": tt.msg}, jsonReply(t, resp), tt.target)
	}
	// Without a token, and with a HEAD: a status and no body.
	req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+filesURL(file), nil)
	require.NoError(t, err)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp = fileReq(t, ts, "HEAD", filesURL(missing), nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// The file system's errors become statuses, whatever the operation.
func TestFileErrorStatus(t *testing.T) {
	pe := func(err error) error { return &os.PathError{Op: "open", Path: "/x", Err: err} }
	for err, code := range map[error]int{
		pe(syscall.ENOENT): 404, pe(syscall.EACCES): 403, pe(syscall.EPERM): 403, pe(syscall.EROFS): 403,
		pe(syscall.EISDIR): 409, pe(syscall.ENOTDIR): 409, pe(syscall.ENAMETOOLONG): 400, pe(syscall.ELOOP): 400,
		files.ErrBadArchive: 400, files.ErrNotRegular: 400, files.ErrOffset: 409,
	} {
		var he *httpError
		require.ErrorAs(t, fileError(err), &he, "%v", err)
		assert.Equal(t, code, he.code, "%v", err)
		assert.Equal(t, err.Error(), he.msg)
	}
	var he *httpError
	full := filepath.Join(mountTmpfs(t, "64k"), "f")
	_, err := files.WriteAtomic(t.Context(), full, bytes.NewReader(make([]byte, 1<<20)), files.WriteOptions{})
	require.ErrorAs(t, fileError(err), &he)
	assert.Equal(t, http.StatusInsufficientStorage, he.code)
	assert.Equal(t, errors.New("boom"), fileError(errors.New("boom")), "anything else is a 500")
}

// archiveNames lists the names of a tar (or tar.gz) body and the content
// of its files.
func archiveNames(t *testing.T, body []byte, gz bool) map[string]string {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if gz {
		zr, err := gzip.NewReader(r)
		require.NoError(t, err)
		r = zr
	}
	tr := tar.NewReader(r)
	got := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		got[hdr.Name] = string(b) + hdr.Linkname
	}
}

func TestFilesArchive(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := filepath.Join(t.TempDir(), "proj")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("read me"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main"), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "src", "out")))
	want := map[string]string{"README": "read me", "src/": "", "src/main.go": "package main", "src/out": "/etc/passwd"}

	for _, format := range []string{"tar", "tar.gz"} {
		resp := fileReq(t, ts, "GET", filesURL(dir, "format", format, "download", "1"), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, map[string]string{"tar": "application/x-tar", "tar.gz": "application/gzip"}[format], resp.Header.Get("Content-Type"))
		assert.Equal(t, `attachment; filename=proj.`+format, resp.Header.Get("Content-Disposition"))
		assert.Equal(t, want, archiveNames(t, bodyOf(t, resp), format == "tar.gz"), "the link is stored, never followed")

		resp = fileReq(t, ts, "HEAD", filesURL(dir, "format", format), nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, bodyOf(t, resp))
	}
}

// syncBuffer is a bytes.Buffer for a logger written from the server's
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A tree that cannot be read to the end gives a response that no client
// takes for whole: the chunked body ends without its last chunk (Go's
// client: unexpected EOF), the archive lacks its end, and the agent says
// why in its log.
func TestFilesArchiveCut(t *testing.T) {
	logs := &syncBuffer{}
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}, setup: func(s *Server) { s.log = zerolog.New(logs) }})
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	// Random bytes, which gzip cannot shrink: the agent, blocked by a
	// reader that does not read, cannot be more than the sockets' buffers
	// (a few MiB) ahead of it.
	data := make([]byte, 32<<20)
	_, _ = rand.Read(data)

	for _, format := range []string{"tar", "tar.gz"} {
		require.NoError(t, os.WriteFile(big, data, 0o644))
		resp := fileReq(t, ts, "GET", filesURL(dir, "format", format), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// The agent has written the header of "big", and so opened it.
		head := make([]byte, 64<<10)
		_, err := io.ReadFull(resp.Body, head)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(big, 0))
		rest, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client sees that the body is cut")
		body := append(head, rest...)
		if format == "tar.gz" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			require.NoError(t, err)
			body, err = io.ReadAll(zr)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF, "gzip without its trailer")
		}
		assert.Contains(t, string(body), "sandbox-executor: archive incomplete: the tree could not be archived: read "+big+": the file shrank")
		tr := tar.NewReader(bytes.NewReader(body))
		_, err = tr.Next()
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, tr)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "tar sees a cut archive")
	}
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "archive cut") == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Regexp(t, regexp.MustCompile(`"level":"warn".*"error":"the tree could not be archived: read [^"]*: the file shrank`), logs.String())
}
