package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// throttled reads from r at about rate bytes a second, in small reads, as
// a slow client on a slow link would.
type throttled struct {
	r     io.Reader
	rate  int
	start time.Time
	n     int
}

func (t *throttled) Read(p []byte) (int, error) {
	if t.start.IsZero() {
		t.start = time.Now()
	}
	if due := t.start.Add(time.Duration(t.n) * time.Second / time.Duration(t.rate)); time.Until(due) > 0 {
		time.Sleep(time.Until(due))
	}
	n, err := t.r.Read(p[:min(len(p), 2048)])
	t.n += n
	return n, err
}

// seqStream runs `seq 1 n` through /run_streaming on a raw loopback
// connection whose reads are throttled to rate bytes a second (0: not
// throttled), checks that the lines are exactly 1..n, and returns the
// complete event's data.
func seqStream(ts interface{ Addr() net.Addr }, n, rate int) (map[string]any, error) {
	conn, err := net.Dial("tcp", ts.Addr().String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"cmd":"seq 1 %d"}`, n)
	req, err := http.NewRequest("POST", "http://x/run_streaming", nil)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(conn, "POST /run_streaming HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		testSecret, len(body), body); err != nil {
		return nil, err
	}
	var r io.Reader = conn
	if rate > 0 {
		r = &throttled{r: conn, rate: rate}
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(r, 4096), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	sr := sse.NewReader(resp.Body)
	next := 1
	var want []byte
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no complete event after line %d", next-1)
		}
		if err != nil {
			return nil, err
		}
		switch string(ev.Name) {
		case "output":
			// Compared as text: decoding a million events under the race
			// detector would take most of the test's time.
			want = strconv.AppendInt(append(want[:0], `{"stream":"stdout","data":"`...), int64(next), 10)
			want = append(want, `"}`...)
			if string(ev.Data) != string(want) {
				got := string(ev.Data)
				ev2, _ := sr.Next()
				return nil, fmt.Errorf("event %s where line %d was due; then %s %s", got, next, ev2.Name, ev2.Data)
			}
			next++
		case "complete":
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, err
			}
			if next != n+1 {
				return d, fmt.Errorf("complete %s after %d lines of %d", ev.Data, next-1, n)
			}
			return d, nil
		default:
			return nil, fmt.Errorf("unexpected event %s", ev.Name)
		}
	}
}

// A client that reads slowly gets every line and a clean complete: the
// drain after the shell exits does not count the time the pipe reader
// spends waiting on the client. Before, the pipe's last 64 KiB were lost
// and complete said {"code":0,"error":false}.
func TestRunStreamingSlowClientLosesNothing(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{DrainDelay: 100 * time.Millisecond}, listener: withSmallSendBuffers})
	// About 1.6 MB of events at 1 MB/s: seq exits with the pipe full and
	// hundreds of kilobytes of events still to send.
	done, err := seqStream(ts.Listener, 30000, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"code": 0.0, "error": false}, done)
}

// smallSendBuffers is a listener whose connections have 16 KiB send
// buffers: a slow client then blocks the server's writes at once, rather
// than after the megabytes the kernel would otherwise buffer.
type smallSendBuffers struct{ net.Listener }

// withSmallSendBuffers is testServer.listener for smallSendBuffers.
func withSmallSendBuffers(ln net.Listener) net.Listener { return smallSendBuffers{ln} }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// Under load (many streams, two CPUs), no stream loses a line: pre-exit
// output is delivered whenever its reader gets to run.
func TestRunStreamingUnderLoadLosesNothing(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{DrainDelay: 20 * time.Millisecond}})
	const streams = 50
	errs := make(chan error, streams)
	var wg sync.WaitGroup
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := seqStream(ts.Listener, 20000, 0)
			if err == nil && (done["code"] != 0.0 || done["truncated"] != nil) {
				err = fmt.Errorf("complete %v", done)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}
