package proxy

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openFDs counts the file descriptors open in the test process.
func openFDs(t *testing.T) int {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(names)
}

// loopFDs is how many more descriptors than before one connection may
// leave open before it counts as a loop: one connection and its
// forwarding need a handful, a loop thousands within milliseconds.
const loopFDs = 200

// requireNoLoop makes one connection to the forwarder at addr and
// requires that the forwarder closes it without the connection looping
// back into the forwarder. The check is bounded: it watches the
// process's descriptors and, at the first sign of a loop, unbinds f
// (which closes every forwarded connection and so ends the loop) and
// fails.
func requireNoLoop(t *testing.T, f *Forwarder, addr string) {
	t.Helper()
	before := openFDs(t)
	c := dial(t, addr)
	closed := make(chan error, 1)
	go func() { // ends when c is closed, by the forwarder or by dial's cleanup
		_, err := io.Copy(io.Discard, c)
		closed <- err
	}()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-closed:
			assert.NoError(t, err, "the forwarder should close the connection")
			require.Eventually(t, func() bool { return openFDs(t) <= before+2 }, 5*time.Second, 10*time.Millisecond,
				"descriptors left open after the connection closed")
			return
		case <-tick.C:
			if n := openFDs(t); n > before+loopFDs {
				f.Unbind()
				t.Fatalf("connection loop: %d descriptors open after one connection, %d before", n, before)
			}
		case <-deadline:
			f.Unbind()
			t.Fatal("the forwarder neither closed the connection nor looped")
		}
	}
}

// TestBindOwnPortRefused is the regression test for the proxy bound to
// itself: one connection, from anyone, looped until every descriptor was
// gone.
func TestBindOwnPortRefused(t *testing.T) {
	f := &Forwarder{}
	addr := startForwarder(t, f)
	port := mustPort(t, addr)
	// Serve registers the listener in its own goroutine.
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.lns) == 1
	}, 5*time.Second, time.Millisecond)
	assert.ErrorIs(t, f.Bind(port), ErrReservedPort)
	_, bound := f.Port()
	assert.False(t, bound)
	requireNoLoop(t, f, addr)
}

// TestOwnPortNeverDialled covers the other way in: a port bound before
// a listener on it is served. Bind cannot know; the connection is closed
// instead of looping.
func TestOwnPortNeverDialled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	f := &Forwarder{}
	require.NoError(t, f.Bind(port))
	served := make(chan error, 1)
	go func() { served <- f.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, f.Close(ctx))
		assert.NoError(t, <-served)
	})
	requireNoLoop(t, f, ln.Addr().String())
}

func TestBindReservedPort(t *testing.T) {
	b := startBackend(t, "")
	api := startBackend(t, "") // stands for the agent's API
	f := &Forwarder{Reserved: []int{api.port()}}
	addr := startForwarder(t, f)
	assert.ErrorIs(t, f.Bind(api.port()), ErrReservedPort)
	_, bound := f.Port()
	assert.False(t, bound)
	require.NoError(t, f.Bind(b.port()))
	assert.Equal(t, "hello", roundTrip(t, dial(t, addr), "hello"))
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	require.NoError(t, err)
	return a.Port
}
