package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/relay"
)

// Stats counts connections and the bytes of each direction, and counts
// the bytes of a connection while it is still open.
func TestStats(t *testing.T) {
	b := startBackend(t, "")
	f := &Forwarder{}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(b.port()))
	assert.Equal(t, Stats{}, f.Stats())

	const size = 3*relay.CountChunk + 5
	c := dial(t, addr)
	sent := make(chan error, 1)
	go func() { _, err := c.Write(bytes.Repeat([]byte("x"), size)); sent <- err }()
	// Read back all but the last chunk's worth: by then at least three
	// full chunks have passed each way, on a connection still open.
	got, err := io.ReadFull(c, make([]byte, 3*relay.CountChunk))
	require.NoError(t, err)
	require.NoError(t, <-sent)
	require.Eventually(t, func() bool {
		s := f.Stats()
		return s.BytesIn >= 3*relay.CountChunk && s.BytesOut >= 3*relay.CountChunk
	}, 5*time.Second, 5*time.Millisecond, "bytes of an open connection counted: %+v", f.Stats())
	s := f.Stats()
	assert.Equal(t, 1, s.Open)
	assert.Equal(t, uint64(1), s.Total)

	require.NoError(t, c.CloseWrite())
	rest, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, size, got+len(rest))
	require.Eventually(t, func() bool { return f.Stats().Open == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, Stats{Total: 1, BytesIn: size, BytesOut: size}, f.Stats())
}

func TestStatsDialFailed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	f := &Forwarder{}
	addr := startForwarder(t, f)
	require.NoError(t, f.Bind(port))
	c := dial(t, addr)
	_, err = io.ReadAll(c)
	require.NoError(t, err, "closed, not reset")
	require.Eventually(t, func() bool { return f.Stats().Open == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, Stats{Total: 1, DialFailed: 1}, f.Stats())
}
