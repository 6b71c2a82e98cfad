package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The platform's CLI leaves content out for an empty file: that writes
// an empty file (it used to be a 400), truncating an existing one.
func TestFileWriteWithoutContent(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "f")
	for _, body := range []string{`{"path": "` + p + `"}`, `{"path": "` + p + `", "content": null}`,
		`{"path": "` + p + `", "is_base64": true}`} {
		require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
		code, reply := call(t, ts, "POST", "/write_file", body)
		assert.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, map[string]any{"success": true}, reply, body)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Empty(t, got, body)
	}
	q := filepath.Join(t.TempDir(), "new")
	_, reply := call(t, ts, "POST", "/write_file", `{"path": "`+q+`"}`)
	assert.Equal(t, map[string]any{"success": true}, reply)
	assert.FileExists(t, q)
}

// rawReadFile returns the status, Content-Type and body of /read_file.
func rawReadFile(t *testing.T, ts *httptest.Server, body any) (int, string, []byte) {
	t.Helper()
	resp := request(t, ts, "POST", "/read_file", body)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}

// The streamed reply is the one encoding/json used to build whole: the
// same bytes, but for '<', '>' and '&', which it escaped and which are
// now written as they are (the same JSON values).
func TestFileReadReplyUnchanged(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	type reply struct {
		Content  string `json:"content"`
		IsBase64 bool   `json:"is_base64,omitempty"`
	}
	old := func(data []byte, asBase64 bool) []byte {
		var buf bytes.Buffer
		r := reply{Content: string(data)}
		if asBase64 {
			r = reply{Content: base64.StdEncoding.EncodeToString(data), IsBase64: true}
		}
		require.NoError(t, json.NewEncoder(&buf).Encode(r))
		return buf.Bytes()
	}
	binary := make([]byte, 200<<10) // more than one chunk of the file
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	text := []byte(strings.Repeat("héllo \"wörld\" \\ \t\r\n\x00\x1f € 😀 \u2028\u2029 ", 5000))
	tests := []struct {
		name     string
		data     []byte
		asBase64 bool // asked for
		wantB64  bool
	}{
		{"empty", nil, false, false},
		{"empty as base64", nil, true, true},
		{"text", []byte("hello\n"), false, false},
		{"long text", text, false, false},
		{"text as base64", text, true, true},
		{"binary", binary, false, true},
		{"binary as base64", binary, true, true},
		{"cut sequence at the end", []byte("abc\xe2\x82"), false, true},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
		require.NoError(t, os.WriteFile(p, tt.data, 0o644))
		code, ctype, got := rawReadFile(t, ts, map[string]any{"path": p, "is_base64": tt.asBase64})
		assert.Equal(t, http.StatusOK, code, tt.name)
		assert.Equal(t, "application/json", ctype, tt.name)
		assert.Equal(t, string(old(tt.data, tt.wantB64)), string(got), tt.name)
	}

	// '<', '>', '&', backspace, form feed: other bytes, the same value.
	p := filepath.Join(dir, "html")
	html := []byte("<a href=\"x?a=1&b=2\">é</a>\b\f\n")
	require.NoError(t, os.WriteFile(p, html, 0o644))
	_, _, got := rawReadFile(t, ts, map[string]any{"path": p})
	assert.Equal(t, `{"content":"<a href=\"x?a=1&b=2\">é</a>\u0008\u000c\n"}`+"\n", string(got))
	var r reply
	require.NoError(t, json.Unmarshal(got, &r))
	assert.Equal(t, string(html), r.Content)
}

// countingWriter is a ResponseWriter that keeps nothing: it counts the
// bytes and records the largest single write. onWrite, if set, runs
// before each write.
type countingWriter struct {
	header   http.Header
	status   int
	total    int64
	maxWrite int
	onWrite  func()
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) { w.status = code }

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.onWrite != nil {
		w.onWrite()
	}
	w.total += int64(len(p))
	w.maxWrite = max(w.maxWrite, len(p))
	return len(p), nil
}

// readFileDirect runs the read_file handler for path, without a network.
func readFileDirect(ctx context.Context, s *Server, w *countingWriter, path string, asBase64 bool) {
	body, _ := json.Marshal(map[string]any{"path": path, "is_base64": asBase64})
	r := httptest.NewRequestWithContext(ctx, "POST", "/read_file", bytes.NewReader(body))
	s.wrap(s.handleFileRead).ServeHTTP(w, r)
}

// 16 concurrent read_file of a 63 MiB file used to take 5.0 GB: each
// reply was built whole (the file, its base64, the JSON). Streamed, a
// reply costs a few buffers whatever the file's size and however many
// run at once: the bytes allocated while 2 replies of a 32 MiB file are
// written, together, stay under 4 MiB (about 120 KiB a reply), and no
// single write is over 64 KiB.
func TestFileReadBoundedMemory(t *testing.T) {
	_, s := newTestServer(t, testServer{})
	dir := t.TempDir()
	const size = 32 << 20
	text, bin := filepath.Join(dir, "text"), filepath.Join(dir, "bin")
	data := bytes.Repeat([]byte("0123456789abcdef\x00\"é€\n"), size/24)
	require.NoError(t, os.WriteFile(text, data, 0o644))
	for i := range data {
		data[i] = byte(i*131) ^ byte(i>>9)
	}
	require.NoError(t, os.WriteFile(bin, data, 0o644))
	data = nil

	for _, tc := range []struct {
		path    string
		replies int
	}{{bin, 2}, {text, 1}} {
		writers := make([]*countingWriter, tc.replies)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		for i := range writers {
			writers[i] = &countingWriter{header: http.Header{}}
			wg.Go(func() { readFileDirect(t.Context(), s, writers[i], tc.path, false) })
		}
		wg.Wait()
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d replies allocated %d bytes", filepath.Base(tc.path), tc.replies, allocated)
		assert.Less(t, allocated, uint64(4<<20), "%s: bytes allocated for %d replies", tc.path, tc.replies)
		for _, w := range writers {
			assert.Equal(t, http.StatusOK, w.status)
			assert.Greater(t, w.total, int64(size), "%s: the whole content was sent", tc.path)
			assert.LessOrEqual(t, w.maxWrite, 64<<10, tc.path)
		}
	}
}

// A failure once the reply has started breaks the connection rather than
// ending a JSON reply that would pass a cut file off as whole.
func TestFileReadAbortsWhenCut(t *testing.T) {
	_, s := newTestServer(t, testServer{})
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("x"), 1<<20), 0o644))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &countingWriter{header: http.Header{}, onWrite: cancel} // the client leaves as the reply starts
	assert.PanicsWithValue(t, http.ErrAbortHandler, func() { readFileDirect(ctx, s, w, p, false) })
	assert.Less(t, w.total, int64(1<<20))
}

// write_file to a named pipe without a reader used to block in open(2)
// for good, holding an OS thread each; 10,000 such calls crashed the
// agent. Each now answers at once, refused; devices and sockets too.
func TestFileWriteRefusesSpecialFiles(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	fifo, sock := filepath.Join(dir, "fifo"), filepath.Join(dir, "sock")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()

	const calls = 50
	replies := make(chan map[string]any, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			_, body := call(t, ts, "POST", "/write_file", map[string]any{"path": fifo, "content": "x"})
			replies <- body
		})
	}
	if !waitTimeout(&wg, 20*time.Second) {
		for range calls { // let the blocked opens go
			if fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				defer syscall.Close(fd)
			}
		}
		wg.Wait()
		t.Fatal("write_file blocked on a named pipe")
	}
	close(replies)
	for body := range replies {
		assert.Equal(t, map[string]any{"success": false,
			"error": "write " + fifo + ": named pipes and sockets cannot be written"}, body)
	}
	for path, want := range map[string]string{
		"/dev/null": "write /dev/null: devices cannot be written",
		sock:        "write " + sock + ": named pipes and sockets cannot be written",
	} {
		code, body := call(t, ts, "POST", "/write_file", map[string]any{"path": path, "content": "x"})
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, map[string]any{"success": false, "error": want}, body)
	}
}

// read_file of /dev/ptmx used to block for good (and keep a new terminal
// open); /dev/zero was read for 64 MiB before it was refused.
func TestFileReadRefusesDevices(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, dev := range []string{"/dev/ptmx", "/dev/zero"} {
		if _, err := os.Stat(dev); err != nil {
			continue
		}
		var wg sync.WaitGroup
		var body map[string]any
		wg.Go(func() { _, body = call(t, ts, "POST", "/read_file", map[string]any{"path": dev}) })
		require.True(t, waitTimeout(&wg, 20*time.Second), "read_file of %s blocked", dev)
		assert.Equal(t, map[string]any{"error": "read " + dev + ": devices cannot be read"}, body)
	}
}

// waitTimeout waits for wg, for at most d, and reports whether it ended.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// delete_dir of "x/.." used to empty x's parent and then report a
// failure. Such paths are a 400 now, and nothing is removed.
func TestDirDeleteRefusesDotDot(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := t.TempDir()
	a := filepath.Join(root, "a")
	require.NoError(t, os.MkdirAll(filepath.Join(a, "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(a, "f"), []byte("x"), 0o644))
	// "/", "." and ".." are refused by the same check (see files'
	// TestRemovable); they are not sent here, where a regression would
	// remove the machine's files.
	for _, p := range []string{a + "/b/..", a + "/b/../", a + "/.", a + "/b/./"} {
		code, body := call(t, ts, "POST", "/delete_dir", map[string]any{"path": p})
		assert.Equal(t, http.StatusBadRequest, code, p)
		assert.Contains(t, body["error"], "invalid path", p)
		assert.Contains(t, body["error"], p, p)
		assert.FileExists(t, filepath.Join(a, "f"), p)
		assert.DirExists(t, filepath.Join(a, "b"), p)
	}
}
