package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// prompt bounds how long a close must take to reach a client. It is far
// below the 5 s dial timeout and the 10 s I/O deadlines, so a test that
// passes proves the close was prompt rather than a timeout.
const prompt = 2 * time.Second

// backend is a loopback TCP server for tests. Each connection is sent
// greeting, if any, and then everything it sends is echoed back; on EOF
// the backend half-closes so the client sees EOF too.
type backend struct {
	ln       net.Listener
	greeting string
	wg       sync.WaitGroup
	mu       sync.Mutex // guards conns
	conns    map[net.Conn]struct{}
}

func startBackend(t testing.TB, greeting string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &backend{ln: ln, greeting: greeting, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *backend) port() int { return b.ln.Addr().(*net.TCPAddr).Port }

// serve runs in its own goroutine; it ends when b.ln is closed.
func (b *backend) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go b.echo(c)
	}
}

// echo runs in its own goroutine; it ends when the peer half-closes or
// the connection fails.
func (b *backend) echo(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		c.Close()
	}()
	if _, err := io.WriteString(c, b.greeting); err != nil {
		return
	}
	if _, err := io.Copy(c, c); err != nil {
		return
	}
	c.(*net.TCPConn).CloseWrite()
}

// startForwarder serves f on a loopback listener and returns the
// listener's address. Cleanup closes f and checks that Serve returned nil.
func startForwarder(t testing.TB, f *Forwarder) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- f.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, f.Close(ctx))
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return ln.Addr().String()
}

func dial(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c.(*net.TCPConn)
}

// roundTrip writes msg on c and reads back len(msg) bytes.
func roundTrip(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	_, err := io.WriteString(c, msg)
	require.NoError(t, err)
	buf := make([]byte, len(msg))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	return string(buf)
}

// requireClosedPromptly asserts that the peer of c closes it within
// prompt: a read ends in EOF or a reset, not a deadline.
func requireClosedPromptly(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(prompt)))
	start := time.Now()
	_, err := io.Copy(io.Discard, c) // skips any greeting still in flight
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "connection still open after %v", prompt)
	assert.Less(t, time.Since(start), prompt)
}

func TestEcho(t *testing.T) {
	b := startBackend(t, "")
	f := &Forwarder{}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(b.port()))

	c := dial(t, addr)
	for i := range 10 {
		msg := fmt.Sprintf("hello %d", i)
		assert.Equal(t, msg, roundTrip(t, c, msg))
	}
}

func TestHalfClose(t *testing.T) {
	// The server answers only after it has read the whole request, as
	// many request/response protocols do.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	serverDone := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverDone <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		req, err := io.ReadAll(c)
		if err == nil {
			_, err = io.WriteString(c, "got "+string(req))
		}
		serverDone <- err
	}()

	f := &Forwarder{}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(ln.Addr().(*net.TCPAddr).Port))
	c := dial(t, addr)
	_, err = io.WriteString(c, "request")
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())

	reply, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "got request", string(reply))
	assert.NoError(t, <-serverDone)
}

func TestNoBindingClosesConnection(t *testing.T) {
	addr := startForwarder(t, &Forwarder{})
	requireClosedPromptly(t, dial(t, addr))
}

func TestBindTwice(t *testing.T) {
	var f Forwarder
	require.NoError(t, f.Bind(8080))
	err := f.Bind(9090)
	assert.ErrorIs(t, err, ErrAlreadyBound)
	port, ok := f.Port()
	assert.True(t, ok)
	assert.Equal(t, 8080, port)
}

func TestBindPortRange(t *testing.T) {
	tests := []struct {
		port    int
		wantErr error
	}{
		{-1, ErrInvalidPort},
		{0, ErrInvalidPort},
		{1, nil},
		{65535, nil},
		{65536, ErrInvalidPort},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.port), func(t *testing.T) {
			var f Forwarder
			err := f.Bind(tt.port)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				_, ok := f.Port()
				assert.False(t, ok)
				return
			}
			require.NoError(t, err)
			port, ok := f.Port()
			assert.True(t, ok)
			assert.Equal(t, tt.port, port)
		})
	}
}

func TestUnbindReturnsOldPort(t *testing.T) {
	var f Forwarder
	port, ok := f.Unbind()
	assert.False(t, ok)
	assert.Equal(t, 0, port)

	require.NoError(t, f.Bind(4000))
	port, ok = f.Unbind()
	assert.True(t, ok)
	assert.Equal(t, 4000, port)
	_, ok = f.Port()
	assert.False(t, ok)
}

func TestUnbindClosesLiveConnection(t *testing.T) {
	b := startBackend(t, "")
	f := &Forwarder{}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(b.port()))
	c := dial(t, addr)
	require.Equal(t, "ping", roundTrip(t, c, "ping")) // the pair is established

	_, ok := f.Unbind()
	require.True(t, ok)
	requireClosedPromptly(t, c)
}

func TestRebind(t *testing.T) {
	a := startBackend(t, "A")
	b := startBackend(t, "B")
	f := &Forwarder{}
	addr := startForwarder(t, f)

	require.NoError(t, f.Bind(a.port()))
	old := dial(t, addr)
	assert.Equal(t, "A", readN(t, old, 1))

	port, ok := f.Unbind()
	require.True(t, ok)
	assert.Equal(t, a.port(), port)
	require.NoError(t, f.Bind(b.port()))

	c := dial(t, addr)
	assert.Equal(t, "B", readN(t, c, 1))
	assert.Equal(t, "echo", roundTrip(t, c, "echo"))
	requireClosedPromptly(t, old)
}

func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	require.NoError(t, err)
	return string(buf)
}

func TestConcurrentConnections(t *testing.T) {
	const (
		conns = 200
		size  = 64 << 10
	)
	b := startBackend(t, "")
	f := &Forwarder{}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(b.port()))

	errc := make(chan error, conns)
	for range conns {
		go func() { errc <- echoPayload(addr, size) }()
	}
	for range conns {
		assert.NoError(t, <-errc) // each echoPayload is bounded by its deadline
	}
}

// echoPayload sends size random bytes through addr, half-closes, and
// checks that the same bytes come back followed by EOF.
func echoPayload(addr string, size int) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return err
	}
	want := make([]byte, size)
	rand.Read(want)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		wrote <- err
	}()
	got, err := io.ReadAll(c)
	if werr := <-wrote; werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(want, got) {
		return fmt.Errorf("payload corrupted: sent %d bytes, got %d", len(want), len(got))
	}
	return nil
}

func TestCloseWithLiveConnections(t *testing.T) {
	b := startBackend(t, "")
	ignore := goleak.IgnoreCurrent() // the backend's accept loop

	f := &Forwarder{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- f.Serve(ln) }()
	require.NoError(t, f.Bind(b.port()))

	var clients []net.Conn
	for range 5 {
		c := dial(t, ln.Addr().String())
		require.Equal(t, "x", roundTrip(t, c, "x"))
		clients = append(clients, c)
	}

	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	require.NoError(t, f.Close(ctx))
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(prompt):
		t.Fatal("Serve did not return after Close")
	}
	for _, c := range clients {
		requireClosedPromptly(t, c)
		c.Close()
	}
	goleak.VerifyNone(t, ignore)

	assert.ErrorIs(t, f.Serve(ln), ErrClosed)
}

func TestBackendRefuses(t *testing.T) {
	// A port that was free a moment ago refuses on 127.0.0.1 and, almost
	// surely, on [::1].
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	var logs testutil.SyncBuffer
	f := &Forwarder{Log: zerolog.New(&logs)}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(port))

	requireClosedPromptly(t, dial(t, addr))
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "dial failed") },
		prompt, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "refused")
}

// TestConcurrentBindUnbind races Bind, Unbind and new connections for
// the race detector. Every connection must end: forwarded, or closed by
// an Unbind or for want of a binding.
func TestConcurrentBindUnbind(t *testing.T) {
	b := startBackend(t, "")
	f := &Forwarder{}
	addr := startForwarder(t, f)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			f.Bind(b.port())
			f.Port()
			f.Unbind()
		}
	}()
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if !assert.NoError(t, err) {
					return
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Write([]byte("hi"))
				_, err = io.Copy(io.Discard, c)
				assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "connection left open")
				c.Close()
			}
		}()
	}
	wg.Wait()
}

// BenchmarkThroughput sends 64 MiB per op to a sink, directly and
// through the Forwarder; compare the two MB/s figures.
func BenchmarkThroughput(b *testing.B) {
	const size = 64 << 20
	sinkAddr := startSink(b, size)
	port := sinkAddr.(*net.TCPAddr).Port
	for _, bc := range []struct {
		name string
		addr func(b *testing.B) string
	}{
		{"direct", func(*testing.B) string { return sinkAddr.String() }},
		{"proxy", func(b *testing.B) string {
			f := &Forwarder{}
			addr := startForwarder(b, f)
			require.NoError(b, f.Bind(port))
			return addr
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := dial(b, bc.addr(b))
			require.NoError(b, c.SetDeadline(time.Time{}))
			chunk := make([]byte, 1<<20)
			ack := make([]byte, 1)
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				for sent := 0; sent < size; sent += len(chunk) {
					_, err := c.Write(chunk)
					require.NoError(b, err)
				}
				_, err := io.ReadFull(c, ack)
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkRoundTrip measures the latency of a 1-byte echo, directly
// and through the Forwarder.
func BenchmarkRoundTrip(b *testing.B) {
	be := startBackend(b, "")
	for _, bc := range []struct {
		name string
		addr func(b *testing.B) string
	}{
		{"direct", func(*testing.B) string { return be.ln.Addr().String() }},
		{"proxy", func(b *testing.B) string {
			f := &Forwarder{}
			addr := startForwarder(b, f)
			require.NoError(b, f.Bind(be.port()))
			return addr
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := dial(b, bc.addr(b))
			require.NoError(b, c.SetDeadline(time.Time{}))
			buf := []byte{'x'}
			b.ResetTimer()
			for range b.N {
				_, err := c.Write(buf)
				require.NoError(b, err)
				_, err = io.ReadFull(c, buf)
				require.NoError(b, err)
			}
		})
	}
}

// startSink serves connections that read size bytes and answer with one
// byte, repeatedly, until the peer leaves.
func startSink(tb testing.TB, size int) net.Addr {
	tb.Helper()
	return testutil.Serve(tb, func(c net.Conn) {
		buf := make([]byte, 256<<10)
		for {
			for left := size; left > 0; {
				n, err := c.Read(buf[:min(left, len(buf))])
				if err != nil {
					return
				}
				left -= n
			}
			if _, err := c.Write([]byte{1}); err != nil {
				return
			}
		}
	}).Addr()
}
