package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// app is a test server on 127.0.0.1 that counts the connections it
// accepted.
type app struct {
	*httptest.Server
	conns, closed atomic.Int64
}

func newApp(t *testing.T, h http.HandlerFunc) *app {
	a := &app{Server: httptest.NewUnstartedServer(h)}
	a.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			a.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			a.closed.Add(1)
		}
	}
	a.Start()
	t.Cleanup(a.Close)
	return a
}

// recordingFallback counts the requests it is given and passes them to an
// http.Transport.
type recordingFallback struct {
	http.Transport
	n atomic.Int64
}

func (f *recordingFallback) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	return f.Transport.RoundTrip(r)
}

func newTransport(t *testing.T) (*Transport, *recordingFallback) {
	fb := &recordingFallback{}
	tr := &Transport{
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		Fallback:       fb,
		MaxIdlePerHost: 4,
		MaxIdle:        8,
		IdleTimeout:    time.Minute,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, fb
}

func get(t *testing.T, tr http.RoundTripper, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, string(b)
}

func TestKeepsConnectionsAlive(t *testing.T) {
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush()
			w.Write([]byte("part two"))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			io.WriteString(w, "hello "+r.URL.RawQuery)
		}
	})
	tr, fb := newTransport(t)
	for i := range 20 {
		resp, body := get(t, tr, http.MethodGet, fmt.Sprintf("%s/?n=%d", a.URL, i))
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, fmt.Sprintf("hello n=%d", i), body)
	}
	resp, body := get(t, tr, http.MethodGet, a.URL+"/chunked")
	assert.Equal(t, "part one, part two", body)
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	resp, _ = get(t, tr, http.MethodGet, a.URL+"/empty")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = get(t, tr, http.MethodOptions, a.URL+"/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 1, a.conns.Load(), "every request on one connection")
	resp, body = get(t, tr, http.MethodHead, a.URL+"/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, body)
	assert.Zero(t, fb.n.Load())
}

func TestOthersGoToTheFallback(t *testing.T) {
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	})
	tr, fb := newTransport(t)
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/", strings.NewReader("body"))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "POST body", string(b))

	req, _ = http.NewRequest(http.MethodGet, a.URL+"/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	assert.False(t, Handles(req))
	req, _ = http.NewRequest(http.MethodDelete, a.URL+"/", nil)
	assert.False(t, Handles(req))
	assert.EqualValues(t, 1, fb.n.Load())
}

// An idle connection the app has closed fails before any reply: the
// request goes again on a new connection, and the caller sees no error.
func TestRetriesAConnectionClosedWhileIdle(t *testing.T) {
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr, _ := newTransport(t)
	get(t, tr, http.MethodGet, a.URL+"/")
	a.CloseClientConnections() // the app drops its keep-alive connections
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		c := tr.idle[strings.TrimPrefix(a.URL, "http://")][0]
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := c.nc.Read(make([]byte, 1))
		_ = c.nc.SetReadDeadline(time.Time{})
		return errors.Is(err, io.EOF)
	}, 5*time.Second, 10*time.Millisecond, "the app closed the idle connection")
	for range 3 {
		_, body := get(t, tr, http.MethodGet, a.URL+"/")
		assert.Equal(t, "ok", body)
	}
	assert.EqualValues(t, 2, a.conns.Load())
}

// A body closed before its end takes its connection with it: the rest of
// that reply is never read as the next one's.
func TestABodyClosedEarlyClosesItsConnection(t *testing.T) {
	rest := make(chan struct{})
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", "200")
			io.WriteString(w, strings.Repeat("x", 100))
			w.(http.Flusher).Flush()
			<-rest // the second half comes once the client has left
			io.WriteString(w, strings.Repeat("x", 100))
			return
		}
		io.WriteString(w, "small")
	})
	tr, _ := newTransport(t)
	req, _ := http.NewRequest(http.MethodGet, a.URL+"/big", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 100))
	require.NoError(t, err)
	resp.Body.Close()
	close(rest)
	_, body := get(t, tr, http.MethodGet, a.URL+"/small")
	assert.Equal(t, "small", body)
	assert.EqualValues(t, 2, a.conns.Load())
}

// A reply whose end is the connection's is not kept.
func TestAReplyToTheEndOfTheConnectionIsNotKept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the app: HTTP/1.0-style replies, ended by close
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			br := bufio.NewReader(c)
			_, _ = http.ReadRequest(br)
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nuntil close")
			c.Close()
		}
	}()
	tr, _ := newTransport(t)
	for range 2 {
		_, body := get(t, tr, http.MethodGet, "http://"+ln.Addr().String()+"/")
		assert.Equal(t, "until close", body)
	}
	assert.EqualValues(t, 2, accepted.Load())
	ln.Close()
	wg.Wait()
}

// The request's context ends a round trip that waits on an app that never
// answers, and the connection with it.
func TestTheContextEndsAStalledRoundTrip(t *testing.T) {
	release := make(chan struct{})
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr, _ := newTransport(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	require.Eventually(t, func() bool { return a.conns.Load() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip still blocked after its context ended")
	}
	tr.mu.Lock()
	assert.Zero(t, tr.nIdle)
	tr.mu.Unlock()
}

// A reply's header is bounded: an app that sends headers without end
// gets an error, not the agent's memory.
func TestAReplyHeaderIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("y", 1000) + "\r\n"
		for range 4096 { // 4 MiB of header, or until the client leaves
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	tr, _ := newTransport(t)
	tr.MaxResponseHeaderBytes = 64 << 10
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	_, err = tr.RoundTrip(req)
	require.ErrorContains(t, err, "header is over 65536 bytes")
	ln.Close()
	wg.Wait()
}

// 1xx replies reach the request's trace, as http.Transport passes them
// (ReverseProxy forwards them to its client), before the final reply.
func TestInformationalRepliesReachTheTrace(t *testing.T) {
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "page")
	})
	tr, _ := newTransport(t)
	var got []int
	var link string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got, link = append(got, code), h.Get("Link")
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, a.URL+"/", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "page", string(b))
	assert.Equal(t, []int{http.StatusEarlyHints}, got)
	assert.Equal(t, "</style.css>; rel=preload", link)
}

// The pool keeps at most MaxIdlePerHost connections to one host, and
// closes those idle for longer than IdleTimeout.
func TestTheIdlePoolIsBounded(t *testing.T) {
	a := newApp(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr, _ := newTransport(t)
	tr.IdleTimeout = 50 * time.Millisecond
	var bodies []io.ReadCloser
	for range 6 { // six at once: six connections
		req, _ := http.NewRequest(http.MethodGet, a.URL+"/", nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		bodies = append(bodies, resp.Body)
	}
	for _, b := range bodies {
		_, _ = io.ReadAll(b)
		b.Close()
	}
	tr.mu.Lock()
	assert.Equal(t, 4, tr.nIdle)
	tr.mu.Unlock()
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.nIdle == 0 && tr.sweep == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return activeConns(a) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the app saw every connection close")
}

// activeConns counts the app's connections not yet closed.
func activeConns(a *app) int64 { return a.conns.Load() - a.closed.Load() }

// An app that sends a body with its reply to a HEAD must not have it read
// as the next request's reply: the connection is not kept after a HEAD.
func TestABodyAfterAHeadIsNotTakenForTheNextReply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a wrong app: every reply has its body, HEAD's too, late
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				late := "" // HEAD's body, sent late: just before the next reply
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body := "reply to " + req.Method
					fmt.Fprintf(c, "%sHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", late, len(body))
					late = ""
					if req.Method == http.MethodHead {
						late = body
						continue
					}
					io.WriteString(c, body)
				}
			}()
		}
	}()
	tr, _ := newTransport(t)
	url := "http://" + ln.Addr().String() + "/"
	get(t, tr, http.MethodHead, url)
	_, body := get(t, tr, http.MethodGet, url)
	assert.Equal(t, "reply to GET", body)
	tr.CloseIdleConnections()
	ln.Close()
	wg.Wait()
}

// Bytes an app sends on a connection while it is idle are never read as
// the next request's reply: the connection is dropped before reuse.
func TestBytesSentUnaskedOnAnIdleConnectionDropIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	unasked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a wrong app: after its first reply, a reply nobody asked for
		defer wg.Done()
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = http.ReadRequest(bufio.NewReader(c))
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nreply %d", n)
			if n == 1 {
				<-unasked
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfake!")
			}
			defer c.Close()
		}
	}()
	tr, _ := newTransport(t)
	url := "http://" + ln.Addr().String() + "/"
	_, body := get(t, tr, http.MethodGet, url)
	require.Equal(t, "reply 1", body)
	close(unasked)
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return !quiet(tr.idle[ln.Addr().String()][0].nc)
	}, 5*time.Second, time.Millisecond, "the unasked reply reached the idle connection")
	_, body = get(t, tr, http.MethodGet, url)
	assert.Equal(t, "reply 2", body)
	tr.CloseIdleConnections()
	ln.Close()
	wg.Wait()
}
