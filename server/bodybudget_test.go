package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// largeWrite returns a write_file body of about size bytes for path.
func largeWrite(path string, size int) string {
	return `{"path":"` + path + `","content":"` + strings.Repeat("a", size) + `"}`
}

// sendPartly starts a write_file request with body on a raw connection to
// ts, sending all of its headers and only the first half of body, and
// returns the connection and the rest.
func sendPartly(t *testing.T, ts string, body string) (net.Conn, string) {
	t.Helper()
	u, err := url.Parse(ts)
	require.NoError(t, err)
	c, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	half := len(body) / 2
	_, err = fmt.Fprintf(c, "POST /write_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		testSecret, len(body), body[:half])
	require.NoError(t, err)
	return c, body[half:]
}

const budgetWait = "semaphore.(*Weighted).Acquire"

// Large JSON bodies are decoded a budget's worth at a time: a second one
// waits while the first is read, and goes on once it is done; neither is
// refused. (Each costs about three times its size while it is decoded:
// without the budget, a handful of 64 MiB write_files exhausted a sandbox
// of 1-2 GB.)
func TestLargeBodiesWaitForTheBudget(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyBudget: 3 << 20}, runner: &executor.Runner{}})
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")

	conn, rest := sendPartly(t, ts.URL, largeWrite(a, 2<<20))
	require.Eventually(t, func() bool { return handlersIn("server.(*Server).handleFileWrite") == 1 },
		10*time.Second, 10*time.Millisecond, "the first body is being read")

	replyB := make(chan int, 1)
	go func() {
		resp := request(t, ts, http.MethodPost, "/write_file", largeWrite(b, 2<<20))
		replyB <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return handlersIn(budgetWait) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the second waits for its turn")
	_, err := os.Stat(b)
	assert.ErrorIs(t, err, os.ErrNotExist, "and has not been written")

	_, err = conn.Write([]byte(rest))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, http.StatusOK, <-replyB)
	for _, p := range []string{a, b} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, int64(2<<20), fi.Size())
	}
}

// A large body that cannot have its turn within the body timeout gets a
// 503, which clients retry; small bodies never wait. A slow sender holds
// the budget for at most the body timeout, so a later request's wait only
// runs out behind a queue: A holds, C waits ahead of B, takes its turn
// when A is cut, and holds it past B's patience.
func TestLargeBodyBudgetTimesOut(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyBudget: 3 << 20, BodyTimeout: 2 * time.Second}, runner: &executor.Runner{}})
	dir := t.TempDir()
	_, _ = sendPartly(t, ts.URL, largeWrite(filepath.Join(dir, "a"), 2<<20))
	require.Eventually(t, func() bool { return handlersIn("server.(*Server).handleFileWrite") == 1 },
		10*time.Second, 10*time.Millisecond)

	code, body := call(t, ts, http.MethodPost, "/write_file", map[string]any{"path": filepath.Join(dir, "small"), "content": "x"})
	assert.Equal(t, http.StatusOK, code, "a small body does not wait: %v", body)

	_, _ = sendPartly(t, ts.URL, largeWrite(filepath.Join(dir, "c"), 2<<20))
	require.Eventually(t, func() bool { return handlersIn(budgetWait) == 1 }, 10*time.Second, 10*time.Millisecond)
	resp := request(t, ts, http.MethodPost, "/write_file", largeWrite(filepath.Join(dir, "b"), 2<<20))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.True(t, resp.Close, "its body was never read: the connection is closed")
}
