package relay

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	b, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// A side that cannot half-close (net.Pipe, as a WebSocket) is closed when
// the other side reaches EOF, so that its peer learns the stream ended;
// the bytes before the EOF still arrive.
func TestJoinClosesWhatCannotHalfClose(t *testing.T) {
	far, near := tcpPair(t)
	p1, p2 := net.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := Join(near, p1)
		done <- err
	}()
	_, err := far.Write([]byte("last words"))
	require.NoError(t, err)
	require.NoError(t, far.CloseWrite())
	_ = p2.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(p2)
	require.NoError(t, err, "EOF, not a timeout")
	assert.Equal(t, "last words", string(got))
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Join did not return")
	}
}

// A failure on one side closes both at once: the other copy, waiting on a
// peer that never sends, ends too.
func TestJoinFailureClosesBoth(t *testing.T) {
	far, near := tcpPair(t)
	p1, p2 := net.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := Join(near, p1)
		done <- err
	}()
	p2.Close() // the pipe's peer is gone: a write to it fails
	_, err := far.Write([]byte("x"))
	require.NoError(t, err)
	_ = far.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = far.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the TCP side was closed too")
	select {
	case err := <-done:
		assert.ErrorIs(t, err, io.ErrClosedPipe)
	case <-time.After(5 * time.Second):
		t.Fatal("Join did not return")
	}
}

type joined struct {
	aToB, bToA int64
	err        error
}

// JoinCounting adds each direction's bytes to its counter while the join
// is open, a chunk at a time, whether it splices (two sockets) or copies
// through a buffer (a pipe); at the end the counters hold the totals.
func TestJoinCountingCountsAsBytesPass(t *testing.T) {
	for _, kind := range []string{"tcp", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			clientFar, clientNear := tcpPair(t)
			var backendNear, backendFar Stream
			if kind == "tcp" {
				backendNear, backendFar = tcpPair(t)
			} else {
				backendNear, backendFar = net.Pipe()
			}
			var up, down atomic.Int64
			done := make(chan joined, 1)
			go func() {
				a, b, err := JoinCounting(clientNear, backendNear, Counts{AToB: &up, BToA: &down})
				done <- joined{a, b, err}
			}()
			const size = 3*CountChunk + 5
			sent := make(chan error, 1)
			go func() { _, err := clientFar.Write(make([]byte, size)); sent <- err }()
			got, err := io.ReadFull(backendFar, make([]byte, 3*CountChunk))
			require.NoError(t, err)
			require.Eventually(t, func() bool { return up.Load() >= 2*CountChunk }, 5*time.Second, time.Millisecond,
				"counted while open: %d", up.Load())
			rest, err := io.ReadFull(backendFar, make([]byte, size-got))
			require.NoError(t, err)
			require.NoError(t, <-sent)
			_, err = backendFar.Write([]byte("back"))
			require.NoError(t, err)
			_, err = io.ReadFull(clientFar, make([]byte, 4))
			require.NoError(t, err)
			require.NoError(t, clientFar.CloseWrite())
			backendFar.Close()
			select {
			case j := <-done:
				assert.Equal(t, int64(got+rest), j.aToB)
				assert.Equal(t, int64(4), j.bToA)
				assert.Equal(t, j.aToB, up.Load())
				assert.Equal(t, j.bToA, down.Load())
			case <-time.After(5 * time.Second):
				t.Fatal("JoinCounting did not return")
			}
		})
	}
}
