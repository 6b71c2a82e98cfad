package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// dialFiles opens a connection to the test server for requests written by
// hand: what a client does before and while it sends a body matters here.
func dialFiles(t *testing.T, ts *httptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// writeHead writes a request's line and headers, with the test secret.
func writeHead(t *testing.T, c net.Conn, method, target string, hdr ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer %s\r\n", method, target, testSecret)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	_, err := io.WriteString(c, b.String())
	require.NoError(t, err)
}

// readReply reads one reply and its JSON body.
func readReply(t *testing.T, br *bufio.Reader) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return resp, m
}

// Readers polling a file while a 50 MiB upload replaces it only ever see
// the old content or the new one, in full: never a part, never a mix.
func TestFilesAtomicOverwrite(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	p := filepath.Join(dir, "big.bin")
	const size = 50 << 20
	old, next := pattern(size, 0x11), pattern(size, 0x22)
	require.NoError(t, os.WriteFile(p, old, 0o644))
	oldSum, newSum := sha256.Sum256(old), sha256.Sum256(next)

	var reads, sawNew, bad atomic.Int64
	stop := make(chan struct{})
	check := func(sum [32]byte) {
		switch sum {
		case oldSum:
			reads.Add(1)
		case newSum:
			reads.Add(1)
			sawNew.Add(1)
		default:
			bad.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range 2 { // other processes of the sandbox, reading the file
		wg.Go(func() {
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(p)
				if err != nil {
					bad.Add(1)
					continue
				}
				check(sha256.Sum256(b))
			}
		})
	}
	wg.Go(func() { // a client downloading it
		for i := 0; i < 2000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h := sha256.New()
			resp, err := ts.Client().Do(authGet(t, ts.URL+filesURL(p)))
			if err == nil {
				_, err = io.Copy(h, resp.Body)
				resp.Body.Close()
			}
			if err != nil {
				bad.Add(1)
				continue
			}
			check([32]byte(h.Sum(nil)))
		}
	})

	pr, pw := io.Pipe()
	done := make(chan *http.Response, 1)
	go func() { done <- fileReq(t, ts, "PUT", filesURL(p), pr) }() // the test waits for it below
	_, err := pw.Write(next[:size/2])
	require.NoError(t, err)
	// Half of the new content is on disk, in the temporary file; the
	// readers go on meanwhile.
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, ".big.bin.upload-*"))
		if len(m) != 1 {
			return false
		}
		fi, err := os.Stat(filepath.Join(m[0], "data")) // the file, in its private directory
		return err == nil && fi.Size() >= size/2
	}, 20*time.Second, 5*time.Millisecond)
	during := reads.Load()
	require.Eventually(t, func() bool { return reads.Load() >= during+6 }, 30*time.Second, 5*time.Millisecond)
	_, err = pw.Write(next[size/2:])
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	resp := <-done
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return sawNew.Load() >= 3 }, 30*time.Second, 5*time.Millisecond)
	close(stop)
	wg.Wait()
	assert.Zero(t, bad.Load(), "a reader saw neither the old content nor the new")
	assert.Empty(t, testutil.Leftovers(t, dir))
}

func authGet(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	return req
}

// A client that goes away midway leaves the old file as it was and no
// temporary file.
func TestFilesUploadKilled(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	p := filepath.Join(dir, "f.bin")
	require.NoError(t, os.WriteFile(p, []byte("the old content"), 0o644))
	for _, framing := range []string{"Content-Length", "Transfer-Encoding"} {
		c, _ := dialFiles(t, ts)
		if framing == "Content-Length" {
			writeHead(t, c, "PUT", filesURL(p), "Content-Length", "20000000")
			_, err := c.Write(make([]byte, 8<<20))
			require.NoError(t, err)
		} else {
			writeHead(t, c, "PUT", filesURL(p), "Transfer-Encoding", "chunked")
			for range 8 {
				_, err := fmt.Fprintf(c, "%x\r\n%s\r\n", 1<<20, make([]byte, 1<<20))
				require.NoError(t, err)
			}
		}
		require.Eventually(t, func() bool {
			m, _ := filepath.Glob(filepath.Join(dir, ".f.bin.upload-*"))
			return len(m) == 1
		}, 10*time.Second, 5*time.Millisecond, "the upload is under way")
		require.NoError(t, c.Close())
		require.Eventually(t, func() bool { return len(testutil.Leftovers(t, dir)) == 0 }, 10*time.Second, 5*time.Millisecond,
			"%s: the temporary file is removed", framing)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "the old content", string(got), framing)
	}
}

// Refusals decided from the headers come before the body is read: a
// client waiting for 100 Continue gets the final status instead and never
// sends the body, and the connection closes cleanly.
func TestFilesEarlyRefusalExpectContinue(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxUpload: 1 << 20}, runner: &executor.Runner{}, setup: func(s *Server) {
		s.freeSpace = func(string) (int64, error) { return 100 << 10, nil }
	}})
	p := filepath.Join(t.TempDir(), "f")
	for _, tt := range []struct {
		length string
		code   int
	}{{"2000000", 413}, {"500000", 507}} {
		c, br := dialFiles(t, ts)
		writeHead(t, c, "PUT", filesURL(p), "Content-Length", tt.length, "Expect", "100-continue")
		resp, body := readReply(t, br)
		assert.Equal(t, tt.code, resp.StatusCode, "no 100 Continue first")
		assert.True(t, resp.Close, "Connection: close")
		assert.NotEmpty(t, body["error"])
		_, err := br.ReadByte()
		assert.ErrorIs(t, err, io.EOF, "closed cleanly, not reset")
	}
	assert.NoFileExists(t, p)
}

// A client that sends its body without waiting for 100 Continue still
// reads the whole early reply: the agent does not reset the connection
// under it.
func TestFilesEarlyRefusalWhileSending(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxUpload: 1 << 20}, runner: &executor.Runner{}})
	p := filepath.Join(t.TempDir(), "f")
	c, br := dialFiles(t, ts)
	writeHead(t, c, "PUT", filesURL(p), "Content-Length", "20000000")
	sent := make(chan struct{})
	go func() { // ends when the agent closes the connection
		defer close(sent)
		chunk := make([]byte, 64<<10)
		for range 20_000_000 / len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	resp, body := readReply(t, br)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, float64(1<<20), body["max_bytes"])
	c.Close()
	<-sent
}

// A body found over the limit while streaming, by a little, is read to
// its end before the reply: the connection stays usable.
func TestFilesLimitMidStreamKeepsConnection(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxUpload: 1 << 20}, runner: &executor.Runner{}})
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	c, br := dialFiles(t, ts)
	writeHead(t, c, "PUT", filesURL(p), "Transfer-Encoding", "chunked")
	for range 18 { // 1.125 MiB
		_, err := fmt.Fprintf(c, "%x\r\n%s\r\n", 64<<10, make([]byte, 64<<10))
		require.NoError(t, err)
	}
	_, err := io.WriteString(c, "0\r\n\r\n")
	require.NoError(t, err)
	resp, _ := readReply(t, br)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.False(t, resp.Close, "the body was read to its end: the connection is kept")
	_, err = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: agent\r\n\r\n")
	require.NoError(t, err)
	resp, body := readReply(t, br)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok", body["status"])
	assert.Empty(t, testutil.Leftovers(t, dir))
	assert.NoFileExists(t, p)
}

// A body that stops coming is 408 after the body timeout, and leaves
// nothing.
func TestFilesUploadStalled(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyTimeout: 300 * time.Millisecond}, runner: &executor.Runner{}})
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	c, br := dialFiles(t, ts)
	writeHead(t, c, "PUT", filesURL(p), "Content-Length", "100")
	_, err := c.Write(bytes.Repeat([]byte("x"), 10))
	require.NoError(t, err)
	resp, body := readReply(t, br)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Equal(t, "request body stalled: nothing received for 300ms", body["error"])
	assert.Empty(t, testutil.Leftovers(t, dir))
	assert.NoFileExists(t, p)
}

// A client that stops reading a download is taken as gone after the
// stall timeout, as with event streams: the handler ends and the
// connection closes, rather than holding the file for ever.
func TestFilesDownloadStalledClient(t *testing.T) {
	logs := &syncBuffer{}
	ts, _ := newTestServer(t, testServer{cfg: Config{StallTimeout: 300 * time.Millisecond}, runner: &executor.Runner{}, setup: func(s *Server) {
		s.log = zerolog.New(logs).Level(zerolog.DebugLevel)
	}})
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(256<<20)) // sparse; far more than the sockets hold
	require.NoError(t, f.Close())

	for i, target := range []string{filesURL(big), filesURL(dir, "format", "tar")} {
		c, br := dialFiles(t, ts)
		writeHead(t, c, "GET", target)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// This client reads nothing more until the agent has given up.
		require.Eventually(t, func() bool { return strings.Count(logs.String(), `"path":"/files"`) > i }, 10*time.Second, 10*time.Millisecond,
			"%s: the handler ended", target)
		n, err := io.Copy(io.Discard, resp.Body)
		assert.Error(t, err, "%s: the body is cut short", target)
		assert.Less(t, n, int64(256<<20))
	}
}
