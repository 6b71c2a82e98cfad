package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// chunked hides a reader's length, so that the request goes chunked.
type chunked struct{ io.Reader }

func permOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestFilesPut(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	p := filepath.Join(dir, "new", "sub", "a.bin")
	data := pattern(300_000, 1)

	resp := fileReq(t, ts, "PUT", filesURL(p), bytes.NewReader(data))
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, map[string]any{"path": p, "size": float64(len(data))}, jsonReply(t, resp))
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Equal(t, fs.FileMode(0o644), permOf(t, p), "a new file")

	require.NoError(t, os.Chmod(p, 0o600))
	resp = fileReq(t, ts, "PUT", filesURL(p), chunked{strings.NewReader("replaced")})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"path": p, "size": float64(8)}, jsonReply(t, resp))
	assert.Equal(t, fs.FileMode(0o600), permOf(t, p), "a replaced file keeps its mode")

	resp = fileReq(t, ts, "PUT", filesURL(p, "mode", "0750"), nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, fs.FileMode(0o750), permOf(t, p))
	got, err = os.ReadFile(p)
	require.NoError(t, err)
	assert.Empty(t, got, "an empty body is an empty file")

	// Content-Encoding: gzip is decoded.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(data)
	require.NoError(t, zw.Close())
	resp = fileReq(t, ts, "PUT", filesURL(p), bytes.NewReader(gz.Bytes()), "Content-Encoding", "gzip")
	assert.Equal(t, map[string]any{"path": p, "size": float64(len(data))}, jsonReply(t, resp))
	got, err = os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(p)))
}

func TestFilesPutAppendOffset(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "log.txt")

	resp := fileReq(t, ts, "PUT", filesURL(p, "append", "1"), strings.NewReader("hello"))
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, map[string]any{"path": p, "size": float64(5)}, jsonReply(t, resp))
	resp = fileReq(t, ts, "PUT", filesURL(p, "append", "true"), chunked{strings.NewReader(" world")})
	assert.Equal(t, map[string]any{"path": p, "size": float64(11)}, jsonReply(t, resp))

	// Resuming: HEAD says the size, offset writes from there.
	size := fileReq(t, ts, "HEAD", filesURL(p), nil).ContentLength
	resp = fileReq(t, ts, "PUT", filesURL(p, "offset", "6"), strings.NewReader("W"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"path": p, "size": float64(11)}, jsonReply(t, resp), "what follows is kept")
	resp = fileReq(t, ts, "PUT", filesURL(p, "offset", "11"), strings.NewReader("!"))
	assert.Equal(t, map[string]any{"path": p, "size": float64(size + 1)}, jsonReply(t, resp))
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "hello World!", string(got))

	resp = fileReq(t, ts, "PUT", filesURL(p, "offset", "100"), strings.NewReader("x"))
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, map[string]any{"error": "write " + p + ": offset past the end of the file (offset 100, size 12)"}, jsonReply(t, resp))
}

func TestFilesPutRefusals(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	tests := []struct {
		target string
		hdr    []string
		code   int
		msg    string
	}{
		{filesURL(dir), nil, 409, "open " + dir + ": is a directory"},
		{filesURL(filepath.Join(file, "x")), nil, 409, "mkdir " + file + ": not a directory"},
		{filesURL(fifo), nil, 400, "write " + fifo + ": named pipes and sockets cannot be written"},
		{filesURL("/dev/null"), nil, 400, "write /dev/null: devices cannot be written"},
		{filesURL(file, "mode", "999"), nil, 400, `mode must be octal permission bits such as 0644, not "999"`},
		{filesURL(file, "offset", "-1"), nil, 400, `offset must be a whole number of bytes, not "-1"`},
		{filesURL(file, "append", "1", "offset", "0"), nil, 400, "append and offset cannot be combined"},
		{filesURL(file, "extract", "zip"), nil, 400, `extract must be tar or tar.gz, not "zip"`},
		{filesURL(dir, "extract", "tar", "mode", "0755"), nil, 400, "extract cannot be combined with append, offset or mode"},
		{filesURL(dir + "/"), nil, 400, "path " + dir + "/ ends with a slash: name the file to write"},
		{"/files", nil, 400, "path is required"},
		{filesURL(file), []string{"Content-Encoding", "br"}, 415, `unsupported Content-Encoding "br": send the body as it is, or gzip`},
		{filesURL(file), []string{"Content-Encoding", "gzip"}, 400, "invalid gzip request body: gzip: invalid header"},
	}
	for _, tt := range tests {
		resp := fileReq(t, ts, "PUT", tt.target, strings.NewReader("new content"), tt.hdr...)
		assert.Equal(t, tt.code, resp.StatusCode, tt.target)
		assert.Equal(t, map[string]any{"error": tt.msg}, jsonReply(t, resp), tt.target)
	}
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(got))
	assert.Empty(t, testutil.Leftovers(t, dir))
}

// A read-only file system is 403.
func TestFilesPutReadOnly(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	require.NoError(t, syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(dir, "x")
	resp := fileReq(t, ts, "PUT", filesURL(p), strings.NewReader("x"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, jsonReply(t, resp)["error"], "read-only file system")
}

// mkTarball makes a tar archive (gzipped if gz) of name, body pairs; a
// name ending in "/" is a directory, a body starting with "->" a link.
func mkTarball(t *testing.T, gz bool, entries ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	zw := gzip.NewWriter(&buf)
	if gz {
		w = zw
	}
	tw := tar.NewWriter(w)
	for i := 0; i+1 < len(entries); i += 2 {
		name, body := entries[i], entries[i+1]
		hdr := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case strings.HasSuffix(name, "/"):
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case strings.HasPrefix(body, "->"):
			hdr.Typeflag, hdr.Linkname, hdr.Size, body = tar.TypeSymlink, body[2:], 0, ""
		}
		require.NoError(t, tw.WriteHeader(hdr))
		_, err := io.WriteString(tw, body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	if !gz {
		return buf.Bytes()[:bytes.LastIndex(buf.Bytes(), make([]byte, 1024))+1024]
	}
	return buf.Bytes()
}

func TestFilesPutExtract(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := filepath.Join(t.TempDir(), "proj")
	resp := fileReq(t, ts, "PUT", filesURL(dir, "extract", "tar.gz"),
		bytes.NewReader(mkTarball(t, true, "src/", "", "src/main.go", "package main", "link", "->src/main.go")))
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, map[string]any{"path": dir, "size": float64(12), "entries": float64(3)}, jsonReply(t, resp))
	got, err := os.ReadFile(filepath.Join(dir, "link"))
	require.NoError(t, err)
	assert.Equal(t, "package main", string(got))

	// Into the existing directory, a plain tar with GNU tar's padding.
	tarball := append(mkTarball(t, false, "README", "hi"), make([]byte, 8192)...)
	resp = fileReq(t, ts, "PUT", filesURL(dir, "extract", "tar"), chunked{bytes.NewReader(tarball)})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"path": dir, "size": float64(2), "entries": float64(1)}, jsonReply(t, resp))
	assert.FileExists(t, filepath.Join(dir, "src", "main.go"), "merged, not replaced")

	// A bad archive is a 400 naming the entry, and changes nothing.
	for _, bad := range [][]byte{
		mkTarball(t, false, "ok", "1", "../evil", "x"),
		mkTarball(t, true, "ok", "1", "out", "->../../etc"),
		mkTarball(t, false, "ok", "1", "big", strings.Repeat("x", 100_000))[:50_000],
	} {
		resp = fileReq(t, ts, "PUT", filesURL(dir, "extract", "tar"), bytes.NewReader(bad))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, jsonReply(t, resp)["error"], "invalid archive")
		assert.NoFileExists(t, filepath.Join(dir, "ok"))
	}
	resp = fileReq(t, ts, "PUT", filesURL(dir, "extract", "tar"), bytes.NewReader(mkTarball(t, false, "../evil", "x")))
	assert.Equal(t, map[string]any{"error": `invalid archive: entry "../evil": its name has a .. element`}, jsonReply(t, resp))
	assert.NoFileExists(t, filepath.Join(filepath.Dir(dir), "evil"))
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(dir)))
}

// formBody builds a multipart form of name, filename, content triples; an
// empty filename is a plain field.
func formBody(t *testing.T, parts ...string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+2 < len(parts); i += 3 {
		var w io.Writer
		var err error
		if parts[i+1] == "" {
			w, err = mw.CreateFormField(parts[i])
		} else {
			w, err = mw.CreateFormFile(parts[i], parts[i+1])
		}
		require.NoError(t, err)
		_, _ = io.WriteString(w, parts[i+2])
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

func TestFilesPostForm(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := t.TempDir()
	dir := filepath.Join(root, "up")
	ctype, body := formBody(t,
		"file", "a.txt", "first",
		"note", "", "a plain field, skipped",
		"file", "../escape.txt", "second",
		"file", "/etc/passwd", "third",
		"file", `C:\Users\me\win.txt`, "fourth")
	resp := fileReq(t, ts, "POST", filesURL(dir, "mode", "0600"), bytes.NewReader(body), "Content-Type", ctype)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"files": []any{
		map[string]any{"path": filepath.Join(dir, "a.txt"), "size": float64(5)},
		map[string]any{"path": filepath.Join(dir, "escape.txt"), "size": float64(6)},
		map[string]any{"path": filepath.Join(dir, "passwd"), "size": float64(5)},
		map[string]any{"path": filepath.Join(dir, "win.txt"), "size": float64(6)},
	}}, jsonReply(t, resp))
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "nothing escaped the directory")
	got, err := os.ReadFile(filepath.Join(dir, "passwd"))
	require.NoError(t, err)
	assert.Equal(t, "third", string(got))
	assert.Equal(t, fs.FileMode(0o600), permOf(t, filepath.Join(dir, "a.txt")))

	// A form without files, a body that is not a form, a form cut short.
	ctype, body = formBody(t, "note", "", "no file")
	resp = fileReq(t, ts, "POST", filesURL(dir), bytes.NewReader(body), "Content-Type", ctype)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, map[string]any{"error": errNoFiles.Error()}, jsonReply(t, resp))
	resp = fileReq(t, ts, "POST", filesURL(dir), strings.NewReader("raw"), "Content-Type", "application/octet-stream")
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	ctype, body = formBody(t, "file", "one.txt", "one", "file", "two.txt", strings.Repeat("2", 10_000))
	resp = fileReq(t, ts, "POST", filesURL(dir), bytes.NewReader(body[:len(body)-5_000]), "Content-Type", ctype)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, jsonReply(t, resp)["error"], "invalid multipart/form-data body")
	assert.NoFileExists(t, filepath.Join(dir, "one.txt"), "a form cut short writes nothing, not even its whole parts")
	assert.Empty(t, testutil.Leftovers(t, dir))

	file := filepath.Join(root, "up", "a.txt")
	ctype, body = formBody(t, "file", "x", "x")
	resp = fileReq(t, ts, "POST", filesURL(file), bytes.NewReader(body), "Content-Type", ctype)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
}

func TestFilesUploadLimit(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxUpload: 1000}, runner: &executor.Runner{}})
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	want := map[string]any{"error": "upload larger than the limit of 1000 bytes", "max_bytes": float64(1000)}

	resp := fileReq(t, ts, "PUT", filesURL(p), bytes.NewReader(make([]byte, 1001)))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "from Content-Length")
	assert.Equal(t, want, jsonReply(t, resp))
	resp = fileReq(t, ts, "PUT", filesURL(p), chunked{bytes.NewReader(make([]byte, 5000))})
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "while streaming")
	assert.Equal(t, want, jsonReply(t, resp))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(make([]byte, 100_000))
	require.NoError(t, zw.Close())
	resp = fileReq(t, ts, "PUT", filesURL(p), bytes.NewReader(gz.Bytes()), "Content-Encoding", "gzip")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "once decoded: %d bytes on the wire", gz.Len())
	ctype, body := formBody(t, "file", "a", strings.Repeat("a", 600), "file", "b", strings.Repeat("b", 600))
	resp = fileReq(t, ts, "POST", filesURL(dir), chunked{bytes.NewReader(body)}, "Content-Type", ctype)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a form in all")

	resp = fileReq(t, ts, "PUT", filesURL(p), bytes.NewReader(make([]byte, 1000)))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "at the limit")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Len(t, got, 1000)
	assert.Empty(t, testutil.Leftovers(t, dir))
	assert.NoFileExists(t, filepath.Join(dir, "a"))
}

// 507 from Content-Length and the free space (the statfs seam), and from
// a real full disk (a small tmpfs): nothing written either way.
func TestFilesUploadNoSpace(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}, setup: func(s *Server) {
		s.freeSpace = func(string) (int64, error) { return 4096, nil }
	}})
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	resp := fileReq(t, ts, "PUT", filesURL(p), bytes.NewReader(make([]byte, 5000)))
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode)
	assert.Equal(t, map[string]any{"error": "not enough space on the device for " + p + ": 5000 bytes sent, 4096 free"}, jsonReply(t, resp))

	full := mountTmpfs(t, "1m")
	q := filepath.Join(full, "f")
	require.NoError(t, os.WriteFile(q, []byte("old"), 0o644))
	resp = fileReq(t, ts, "PUT", filesURL(q), chunked{bytes.NewReader(make([]byte, 3<<20))})
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode)
	assert.Equal(t, map[string]any{"error": "write " + q + ": no space left on device"}, jsonReply(t, resp))
	got, err := os.ReadFile(q)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	assert.Empty(t, testutil.Leftovers(t, full))
	resp = fileReq(t, ts, "PUT", filesURL(filepath.Join(full, "d"), "extract", "tar"),
		bytes.NewReader(mkTarball(t, false, "a", strings.Repeat("a", 3<<20))))
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode)
	assert.NoDirExists(t, filepath.Join(full, "d"))
	assert.Empty(t, testutil.Leftovers(t, full))
}
