package readiness

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// freePort returns a port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// server starts a Python HTTP server on host:port after sleeping delay
// seconds; it answers 503 for the first unavailable seconds after binding.
// It prints the time it bound at. exitEarly makes it exit before binding.
func server(t *testing.T, host string, port int, delay, unavailable float64) (*exec.Cmd, <-chan time.Time) {
	t.Helper()
	script := `
import http.server, sys, time
host, port, delay, unavailable = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
time.sleep(delay)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503 if time.time() < bound + unavailable else 200)
        self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer((host, port), H)
bound = time.time()
print(bound, flush=True)
s.serve_forever()
`
	cmd := exec.Command("/usr/bin/python3", "-c", script, host, strconv.Itoa(port),
		strconv.FormatFloat(delay, 'f', -1, 64), strconv.FormatFloat(unavailable, 'f', -1, 64))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	bound := make(chan time.Time, 1)
	go readBound(out, bound)
	return cmd, bound
}

// readBound runs in its own goroutine; it ends when the server's stdout
// does (the test's cleanup kills it).
func readBound(out interface{ Read([]byte) (int, error) }, bound chan<- time.Time) {
	line, err := bufio.NewReader(out).ReadString('\n')
	if err == nil {
		if f, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err == nil {
			bound <- time.Unix(0, int64(f*1e9))
		}
	}
	close(bound)
}

func TestReadySoonAfterBinding(t *testing.T) {
	for _, mode := range []string{ModeTCP, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			port := freePort(t)
			_, bound := server(t, "127.0.0.1", port, 1, 0)
			res := Wait(t.Context(), Spec{Port: port, Mode: mode, Timeout: 10 * time.Second}, nil)
			readyAt := time.Now()
			require.True(t, res.Ready, res.LastError)
			assert.Equal(t, "127.0.0.1", res.Address)
			at, ok := <-bound
			require.True(t, ok)
			assert.Less(t, readyAt.Sub(at), 600*time.Millisecond, "ready within 600 ms of binding")
			assert.GreaterOrEqual(t, res.Waited, 900*time.Millisecond, "not before the server bound")
		})
	}
}

func TestReadyOnIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no ::1 here")
	}
	defer ln.Close()
	res := Wait(t.Context(), Spec{Port: ln.Addr().(*net.TCPAddr).Port, Timeout: 5 * time.Second}, nil)
	require.True(t, res.Ready)
	assert.Equal(t, "::1", res.Address)
}

func TestBoundWhereNotProbed(t *testing.T) {
	port := freePort(t)
	_, bound := server(t, "127.0.0.2", port, 0, 0)
	<-bound
	res := Wait(t.Context(), Spec{Port: port, Timeout: 700 * time.Millisecond}, nil)
	assert.False(t, res.Ready)
	assert.Equal(t, ReasonTimeout, res.Reason)
	assert.Contains(t, res.LastError, "listening only on 127.0.0.2")
}

func TestHTTPReadyOnlyAfter503(t *testing.T) {
	port := freePort(t)
	_, bound := server(t, "127.0.0.1", port, 0, 1)
	at := <-bound
	res := Wait(t.Context(), Spec{Port: port, Mode: ModeHTTP, Timeout: 10 * time.Second}, nil)
	require.True(t, res.Ready, res.LastError)
	assert.GreaterOrEqual(t, time.Since(at), time.Second, "not while it answers 503")

	// tcp calls it ready at once, and a timeout names the status.
	port = freePort(t)
	_, bound = server(t, "127.0.0.1", port, 0, 30)
	<-bound
	assert.True(t, Wait(t.Context(), Spec{Port: port, Timeout: 5 * time.Second}, nil).Ready)
	res = Wait(t.Context(), Spec{Port: port, Mode: ModeHTTP, Timeout: 300 * time.Millisecond}, nil)
	assert.False(t, res.Ready)
	assert.Equal(t, "127.0.0.1: GET / answered 503", res.LastError, "a status says more than ::1's refusal")
}

func TestProcessExitsFirst(t *testing.T) {
	port := freePort(t)
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.2; exit 3")
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	start := time.Now()
	res := Wait(t.Context(), Spec{Port: port, Timeout: 10 * time.Second}, exited)
	assert.False(t, res.Ready)
	assert.Equal(t, ReasonExited, res.Reason)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := Wait(ctx, Spec{Port: freePort(t), Timeout: 10 * time.Second}, nil)
	assert.Equal(t, ReasonGone, res.Reason)
}

func TestParseProcIP(t *testing.T) {
	assert.Equal(t, "127.0.0.1", parseProcIP("0100007F").String())
	assert.Equal(t, "::1", parseProcIP("00000000000000000000000001000000").String())
	assert.Nil(t, parseProcIP("zz"))
}
