package executor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	s := <-accepted
	require.NotNil(t, s)
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// A socket behind an io.LimitedReader is spliced into the pipe: every
// byte arrives, in order, after what a MultiReader puts before it.
func TestWriteStdinSplicesFromSocket(t *testing.T) {
	var r Runner
	p, col := startCat(t, &r, Command{Cmd: "sha256sum", Stdin: true})
	client, server := tcpPair(t)
	data := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n', 'x', 'y'}, 3<<20) // 21 MiB
	sent := make(chan error, 1)
	go func() {
		_, err := client.Write(data)
		sent <- err
	}()
	src := io.MultiReader(strings.NewReader("head"), &io.LimitedReader{R: server, N: int64(len(data))})
	n, err := p.WriteStdin(t.Context(), src, time.Minute)
	require.NoError(t, err)
	require.NoError(t, <-sent)
	assert.Equal(t, int64(4+len(data)), n)
	require.NoError(t, p.CloseStdin())
	p.Wait()
	sum := sha256.Sum256(append([]byte("head"), data...))
	assert.Equal(t, []string{hex.EncodeToString(sum[:]) + "  -"}, col.get(Stdout))
}

func TestWriteStdinSpliceStops(t *testing.T) {
	var r Runner
	spliceFrom := func(ctx context.Context, p *Process, server *net.TCPConn, n int64, stall time.Duration) (int64, error) {
		return p.WriteStdin(ctx, &io.LimitedReader{R: server, N: n}, stall)
	}

	t.Run("client sends nothing for the stall time", func(t *testing.T) {
		p, _ := startCat(t, &r, Command{Cmd: "cat >/dev/null", Stdin: true})
		client, server := tcpPair(t)
		_, err := client.Write([]byte("some"))
		require.NoError(t, err)
		n, err := spliceFrom(t.Context(), p, server, 100, 100*time.Millisecond)
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.NotErrorIs(t, err, ErrStdinStalled)
		assert.Equal(t, int64(4), n)
	})
	t.Run("command reads nothing for the stall time", func(t *testing.T) {
		p, _ := startCat(t, &r, Command{Cmd: "sleep 30", Stdin: true})
		client, server := tcpPair(t)
		go func() { _, _ = client.Write(make([]byte, 64<<20)) }() // ends when the test closes the sockets
		n, err := spliceFrom(t.Context(), p, server, 64<<20, 100*time.Millisecond)
		assert.ErrorIs(t, err, ErrStdinStalled)
		// A spliced pipe holds whole socket fragments in its 256 slots,
		// so more than its nominal 1 MiB.
		assert.Positive(t, n)
		assert.Less(t, n, int64(64<<20))
	})
	t.Run("client leaves", func(t *testing.T) {
		p, _ := startCat(t, &r, Command{Cmd: "cat >/dev/null", Stdin: true})
		client, server := tcpPair(t)
		_, err := client.Write([]byte("0123456789"))
		require.NoError(t, err)
		client.Close()
		n, err := spliceFrom(t.Context(), p, server, 100, 0)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Equal(t, int64(10), n)
	})
	t.Run("context ends while waiting for the socket", func(t *testing.T) {
		p, _ := startCat(t, &r, Command{Cmd: "cat >/dev/null", Stdin: true})
		_, server := tcpPair(t)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := spliceFrom(ctx, p, server, 100, 0)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("command ends while waiting for the socket", func(t *testing.T) {
		p, _ := startCat(t, &r, Command{Cmd: "sleep 30", Stdin: true})
		_, server := tcpPair(t)
		done := make(chan error, 1)
		go func() {
			_, err := spliceFrom(context.Background(), p, server, 100, 0)
			done <- err
		}()
		require.Eventually(t, func() bool {
			p.stdin.mu.Lock()
			defer p.stdin.mu.Unlock()
			return p.stdin.writer != nil && p.stdin.writer.source != nil
		}, 5*time.Second, 5*time.Millisecond)
		require.NoError(t, p.Signal(syscall.SIGKILL))
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrStdinClosed)
			assert.ErrorIs(t, err, ErrFinished)
		case <-time.After(10 * time.Second):
			t.Fatal("the splice did not end with the command")
		}
	})
}
