package tunnels

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoPort serves an echo on a loopback port until the test ends: what a
// connection sends comes back, and its EOF is answered with EOF.
func echoPort(t *testing.T) int {
	t.Helper()
	ln := testutil.Serve(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	return ln.Addr().(*net.TCPAddr).Port
}

func newRegistry(t *testing.T) *Registry {
	t.Helper()
	r := &Registry{}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Close(ctx))
	})
	return r
}

// joined runs Join of t with one end of a socket pair in a goroutine, and
// returns the other end, as a client would hold it, and a function that
// waits for Join's result.
func joined(t *testing.T, tun *Tunnel, prefix []byte) (*net.TCPConn, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- tun.Join(server.(*net.TCPConn), prefix) }()
	wait := sync.OnceValue(func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Error("Join did not return")
			return nil
		}
	})
	t.Cleanup(func() { wait() })
	return client.(*net.TCPConn), wait
}

func TestTargets(t *testing.T) {
	r := newRegistry(t)
	r.Reserved = []int{echoPort(t)}
	port := echoPort(t)
	tests := []struct {
		name string
		to   Target
		want error
	}{
		{"port 0", Target{Port: 0}, ErrInvalidPort},
		{"port too big", Target{Port: 65536}, ErrInvalidPort},
		{"another host", Target{IP: netip.MustParseAddr("10.0.0.1"), Port: port}, ErrNotLoopback},
		{"unspecified", Target{IP: netip.MustParseAddr("0.0.0.0"), Port: port}, ErrNotLoopback},
		{"reserved", Target{Port: r.Reserved[0]}, ErrReservedPort},
		{"nothing listening", Target{Port: testutil.ClosedPort(t)}, ErrRefused},
		{"127.0.0.1", Target{IP: netip.MustParseAddr("127.0.0.1"), Port: port}, nil},
		{"mapped 127.0.0.1", Target{IP: netip.MustParseAddr("::ffff:127.0.0.1"), Port: port}, nil},
		{"any loopback", Target{Port: port}, nil},
	}
	for _, tt := range tests {
		tun, err := r.Open(t.Context(), Connect, tt.to, "test")
		if tt.want != nil {
			assert.ErrorIs(t, err, tt.want, tt.name)
			continue
		}
		if assert.NoError(t, err, tt.name) {
			tun.Close()
		}
	}
	assert.Empty(t, r.List(), "failed and closed tunnels are released")
}

// Bytes pass both ways with the prefix first, a half-close passes through
// and the echo's answer to it still arrives; then both ends close.
func TestJoinHalfClose(t *testing.T) {
	r := newRegistry(t)
	tun, err := r.Open(t.Context(), Connect, Target{Port: echoPort(t)}, "test")
	require.NoError(t, err)
	client, done := joined(t, tun, []byte("early "))
	_, err = client.Write([]byte("late"))
	require.NoError(t, err)
	require.NoError(t, client.CloseWrite())
	got, err := io.ReadAll(client)
	require.NoError(t, err)
	assert.Equal(t, "early late", string(got), "the echo saw the client's EOF and answered with its own")
	assert.NoError(t, done())
	assert.Empty(t, r.List())
}

// List shows the bytes moved each way while the tunnel is open.
func TestListBytes(t *testing.T) {
	r := newRegistry(t)
	port := echoPort(t)
	tun, err := r.Open(t.Context(), WebSocket, Target{Port: port}, "1.2.3.4:5")
	require.NoError(t, err)
	client, _ := joined(t, tun, nil)
	msg := bytes.Repeat([]byte("x"), 100_000)
	go func() { _, _ = client.Write(msg) }()
	_, err = io.ReadFull(client, make([]byte, len(msg)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l := r.List()
		return len(l) == 1 && l[0].ToPort == int64(len(msg)) && l[0].FromPort == int64(len(msg))
	}, 5*time.Second, 5*time.Millisecond, "%+v", r.List())
	l := r.List()
	assert.Equal(t, Info{ID: tun.ID(), Kind: WebSocket, Port: port, Target: l[0].Target, Client: "1.2.3.4:5",
		Started: tun.started, ToPort: 100_000, FromPort: 100_000}, l[0])
	tun.Close()
}

// At the cap, Open fails until a tunnel ends.
func TestCap(t *testing.T) {
	r := newRegistry(t)
	r.Max = 2
	port := echoPort(t)
	var open []*Tunnel
	for range 2 {
		tun, err := r.Open(t.Context(), Connect, Target{Port: port}, "test")
		require.NoError(t, err)
		open = append(open, tun)
	}
	_, err := r.Open(t.Context(), Connect, Target{Port: port}, "test")
	assert.ErrorIs(t, err, ErrTooMany)
	open[0].Close()
	tun, err := r.Open(t.Context(), Connect, Target{Port: port}, "test")
	require.NoError(t, err)
	tun.Close()
	open[1].Close()
}

// Close ends the tunnels being joined, and those opened and not joined
// yet, and waits for them; Open then fails.
func TestCloseEndsTunnels(t *testing.T) {
	r := &Registry{}
	port := echoPort(t)
	var clients []*net.TCPConn
	var dones []func() error
	for range 3 {
		tun, err := r.Open(t.Context(), Connect, Target{Port: port}, "test")
		require.NoError(t, err)
		c, done := joined(t, tun, nil)
		// A byte echoed through the tunnel: its Join has begun (joined
		// returns before it may have), so Close finds it being joined.
		_, err = c.Write([]byte{'x'})
		require.NoError(t, err)
		_, err = io.ReadFull(c, make([]byte, 1))
		require.NoError(t, err)
		clients, dones = append(clients, c), append(dones, done)
	}
	idle, err := r.Open(t.Context(), Connect, Target{Port: port}, "test")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Close(ctx))
	for i, c := range clients {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadAll(c)
		assert.NoError(t, err, "client %d sees the tunnel close", i)
		assert.NoError(t, dones[i]())
	}
	c, done := joined(t, idle, nil)
	assert.ErrorIs(t, done(), ErrClosed, "a tunnel closed before its Join")
	_, err = io.ReadAll(c)
	assert.NoError(t, err)
	_, err = r.Open(t.Context(), Connect, Target{Port: port}, "test")
	assert.ErrorIs(t, err, ErrClosed)
}

// Many tunnels opened and closed at once, racing Close, leave nothing
// behind (goleak checks the goroutines).
func TestConcurrentOpenClose(t *testing.T) {
	r := &Registry{Max: 8}
	port := echoPort(t)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tun, err := r.Open(context.Background(), Connect, Target{Port: port}, "test")
			if err != nil {
				return // the cap, or closed
			}
			tun.Close()
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wg.Wait()
	require.NoError(t, r.Close(ctx))
	assert.Empty(t, r.List())
}
