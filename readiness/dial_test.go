package readiness

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// dialTCP answers as net.Dial does: nil where something listens, on
// 127.0.0.1 and on ::1; a "dial" *net.OpError wrapping ECONNREFUSED where
// nothing does; and ctx's error once ctx has ended.
func TestDialTCP(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "::1"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil && ip == "::1" {
			t.Logf("no ::1 here: %v", err)
			continue
		}
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		assert.NoError(t, dialTCP(t.Context(), time.Now().Add(time.Second), net.ParseIP(ip), port), ip)
		require.NoError(t, ln.Close())

		err = dialTCP(t.Context(), time.Now().Add(time.Second), net.ParseIP(ip), port)
		var op *net.OpError
		require.ErrorAs(t, err, &op, ip)
		assert.Equal(t, "dial", op.Op)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, ip)
		assert.Equal(t, ip+": connect: connection refused", dialError(ip, err).msg)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	err = dialTCP(ctx, time.Now().Add(time.Second), net.ParseIP("127.0.0.1"), ln.Addr().(*net.TCPAddr).Port)
	if err != nil { // a loopback connect may be made before ctx is looked at
		assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	}
}

// A connection the listener does not take (its accept queue is full, so
// the kernel drops the SYN) goes on after the connect; dialTCP waits for
// it until its deadline, or until ctx ends, and says which.
func TestDialTCPInProgress(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, unix.Listen(fd, 0)) // never accepted: the queue fills
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	port := sa.(*unix.SockaddrInet4).Port
	full := false
	for i := 0; i < 16 && !full; i++ { // fill the queue until a connect hangs
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err != nil {
			full = true
			continue
		}
		defer c.Close()
	}
	require.True(t, full, "the listener's queue never filled")

	start := time.Now()
	err = dialTCP(t.Context(), time.Now().Add(300*time.Millisecond), net.ParseIP("127.0.0.1"), port)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = dialTCP(ctx, time.Now().Add(10*time.Second), net.ParseIP("127.0.0.1"), port)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 5*time.Second)
}
