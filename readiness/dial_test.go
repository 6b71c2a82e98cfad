package readiness

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
