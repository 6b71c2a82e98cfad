package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// rawRequest sends an HTTP/1.1 request on a plain TCP connection, so the
// test decides exactly what is read, and when.
func rawRequest(t *testing.T, ts *httptest.Server, method, path, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	// A small receive buffer makes the server's writes block sooner.
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		method, path, testSecret, len(body), body)
	require.NoError(t, err)
	return conn, bufio.NewReaderSize(conn, 4096)
}

// A /run_streaming client that stays connected but stops reading is taken
// as gone after the stall timeout: its command's group is killed.
func TestRunStreamingStalledClientKillsGroup(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{StallTimeout: 300 * time.Millisecond}, runner: &executor.Runner{}})
	_, br := rawRequest(t, ts, "POST", "/run_streaming", `{"cmd":"sleep 100 & echo pid=$!; exec yes"}`)
	pidRe := regexp.MustCompile(`"data":"pid=(\d+)"`)
	var pid int
	for pid == 0 {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if m := pidRe.FindStringSubmatch(line); m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
	}
	// From here on the client reads nothing.
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 10*time.Second, 10*time.Millisecond,
		"the stalled client's command group survived")
}

// A log reader that stays connected but stops reading is removed after
// the stall timeout, before the stream could have ended by itself.
func TestProcessLogsStalledReaderRemoved(t *testing.T) {
	ts, s := newTestServer(t, testServer{cfg: Config{StallTimeout: 300 * time.Millisecond}, runner: &executor.Runner{}})
	// 20 MB of 1 KB lines: the ring keeps 8 MiB, more than any socket
	// buffer holds, so the handler's writes must block.
	id := startProcess(t, ts, s, `yes "$(head -c 1000 /dev/zero | tr '\0' x)" | head -n 20000; sleep 100`)
	p, err := s.procs.Get(id)
	require.NoError(t, err)
	rawRequest(t, ts, "GET", "/process_logs_streaming?id="+id, "")
	require.Eventually(t, func() bool { return p.Subscribers() == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return p.Subscribers() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the stalled reader was not removed")
	// The stream was cut, not ended: the process still runs, so it could
	// not have ended by itself.
	assert.Equal(t, procs.StatusRunning, p.Info().Status)
}
