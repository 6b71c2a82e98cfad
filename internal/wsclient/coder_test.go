package wsclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pattern is n bytes of a pattern that a shifted or dropped block would
// change: the index of each 8-byte word, and a counter.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/8) ^ byte(i*7)
	}
	return b
}

// 64 MiB each way through coder/websocket's server (the agent's library),
// echoed, arrive byte for byte: unmasked by it, framed by it. Half goes
// through Write (in big writes, cut into frames), half through ReadFrom,
// and the echo is read through WriteTo; the server pings throughout, and
// each ping's pong arrives.
func TestBulkEchoThroughCoderServer(t *testing.T) {
	const size = 64 << 20
	pings := make(chan int, 1)
	addr := coderServer(t, func(ctx context.Context, ws *websocket.Conn) {
		nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
		pctx, stop := context.WithCancel(ctx)
		go func() {
			n := 0
			for pctx.Err() == nil {
				if ws.Ping(pctx) == nil {
					n++
				}
			}
			pings <- n
		}()
		_, _ = io.CopyBuffer(nc, nc, make([]byte, 100<<10)) // its own framing, not ours
		stop()
		nc.Close()
	})
	c := dialTest(t, addr)
	data := pattern(size)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(data[:size/2])
		if err == nil {
			_, err = io.Copy(c, struct{ io.Reader }{newChunkReader(data[size/2:], 100_000)})
		}
		wrote <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(c, size))
	require.NoError(t, err)
	require.NoError(t, <-wrote)
	assert.Equal(t, int64(size), n)
	assert.Equal(t, sha256.Sum256(data), [32]byte(h.Sum(nil)), "the echo differs")
	require.NoError(t, c.Close())
	assert.Positive(t, <-pings, "no ping got its pong")
}

// chunkReader gives b in reads of at most n bytes, as a socket would.
type chunkReader struct {
	b []byte
	n int
}

func newChunkReader(b []byte, n int) *chunkReader { return &chunkReader{b, n} }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	m := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[m:]
	return m, nil
}

// Close is a clean close for coder/websocket: its reader sees 1000.
func TestCloseSeenByCoderServer(t *testing.T) {
	status := make(chan websocket.StatusCode, 1)
	addr := coderServer(t, func(ctx context.Context, ws *websocket.Conn) {
		_, msg, err := ws.Read(ctx)
		assert.NoError(t, err)
		assert.Equal(t, "last words", string(msg))
		_, _, err = ws.Read(ctx)
		status <- websocket.CloseStatus(err)
	})
	c := dialTest(t, addr)
	_, err := c.Write([]byte("last words"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.Equal(t, websocket.StatusNormalClosure, <-status)
}

// coder/websocket's Close (as the agent's, when the port ends) is the end
// of the stream for Read, after the data before it; the server's Close
// returns without error, so the client answered its close frame.
func TestCoderServerCloses(t *testing.T) {
	closed := make(chan error, 1)
	addr := coderServer(t, func(ctx context.Context, ws *websocket.Conn) {
		assert.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("the end")))
		closed <- ws.Close(websocket.StatusNormalClosure, "")
	})
	c := dialTest(t, addr)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	var got bytes.Buffer
	_, err := io.Copy(&got, c) // through WriteTo, which ends without error at the close
	require.NoError(t, err)
	assert.Equal(t, "the end", got.String())
	assert.NoError(t, <-closed)
	_, err = c.Write([]byte("x"))
	assert.True(t, errors.Is(err, ErrClosing), "%v", err)
}
