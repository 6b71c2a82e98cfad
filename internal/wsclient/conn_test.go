package wsclient

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every frame is a final, masked binary frame with a key of its own, and
// its payload unmasks to what was written; a write bigger than a frame is
// cut into frames of maxFramePayload.
func TestWriteFramesAreMaskedWithFreshKeys(t *testing.T) {
	const writes = 64
	got := make(chan []rawFrame, 1)
	c := rawServer(t, func(p *rawPeer) {
		var fs []rawFrame
		for range writes + 2 {
			f, err := p.readFrame()
			if !assert.NoError(t, err) {
				break
			}
			fs = append(fs, f)
		}
		got <- fs
	})
	for i := range writes {
		_, err := c.Write(bytes.Repeat([]byte{byte(i)}, 1+i*97))
		require.NoError(t, err)
	}
	big := bytes.Repeat([]byte("0123456789"), (maxFramePayload+maxFramePayload/2)/10)
	_, err := c.Write(big)
	require.NoError(t, err)
	fs := <-got
	require.Len(t, fs, writes+2)
	keys := map[uint32]bool{}
	for i, f := range fs {
		assert.True(t, f.fin && f.masked && f.op == opBinary, "frame %d", i)
		keys[f.key] = true
		if i < writes {
			assert.Equal(t, bytes.Repeat([]byte{byte(i)}, 1+i*97), f.payload, "frame %d", i)
		}
	}
	assert.Len(t, keys, writes+2, "a mask key was used twice")
	assert.Len(t, fs[writes].payload, maxFramePayload)
	assert.Equal(t, big, append(fs[writes].payload, fs[writes+1].payload...))
}

// A message in fragments, with pings between them, reads as its bytes,
// and each ping is answered, in order, with a pong of its payload.
func TestFragmentsAndPings(t *testing.T) {
	pongs := make(chan []string, 1)
	c := rawServer(t, func(p *rawPeer) {
		assert.NoError(t, p.write(frame(false, opBinary, []byte("ab")), frame(true, opPing, []byte("p1")),
			frame(false, opContinuation, nil), frame(false, opContinuation, []byte("cd")),
			frame(true, opPing, []byte("p2")), frame(true, opContinuation, []byte("ef")),
			frame(true, opBinary, []byte("gh"))))
		var got []string
		for range 2 {
			f, err := p.readUntil(opPong)
			if !assert.NoError(t, err) {
				break
			}
			got = append(got, string(f.payload))
		}
		pongs <- got
	})
	got := make([]byte, 8)
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, "abcdefgh", string(got))
	assert.Equal(t, []string{"p1", "p2"}, <-pongs)
}

// A ping is answered even while a Write is blocked on a server that does
// not read, and Read is not held up by it: the pong waits for the write.
func TestPingDuringBlockedWrite(t *testing.T) {
	blocked, release := make(chan struct{}), make(chan struct{})
	pong := make(chan string, 1)
	c := rawServer(t, func(p *rawPeer) {
		<-blocked
		assert.NoError(t, p.write(frame(true, opPing, []byte("late")), frame(true, opBinary, []byte("x"))))
		<-release
		f, err := p.readUntil(opPong)
		assert.NoError(t, err)
		pong <- string(f.payload)
		f, err = p.readUntil(opClose)
		assert.NoError(t, err)
		assert.NoError(t, p.write(frame(true, opClose, f.payload)))
	})
	writing := make(chan error, 1)
	go func() {
		// More than the socket buffers hold: it blocks until the server reads.
		_, err := c.Write(make([]byte, 16<<20))
		writing <- err
	}()
	require.Eventually(t, func() bool { return len(c.wlock) == 1 }, 5*time.Second, time.Millisecond)
	close(blocked)
	got := make([]byte, 1)
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
	close(release)
	assert.Equal(t, "late", <-pong)
	require.NoError(t, <-writing)
}

// The server's close frame ends reading with io.EOF and is answered with
// its code; writes then fail, and Close returns at once.
func TestServerCloses(t *testing.T) {
	reply := make(chan rawFrame, 1)
	c := rawServer(t, func(p *rawPeer) {
		assert.NoError(t, p.write(frame(true, opBinary, []byte("bye")), frame(true, opClose, closePayload(closeNormal, ""))))
		f, err := p.readUntil(opClose)
		assert.NoError(t, err)
		reply <- f
	})
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "bye", string(got))
	f := <-reply
	assert.Equal(t, closeNormal, int(binary.BigEndian.Uint16(f.payload)))
	_, err = c.Write([]byte("more"))
	assert.ErrorIs(t, err, ErrClosing)
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, c.Close())
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, net.ErrClosed)
}

// A close code other than a normal end is Read's *CloseError.
func TestServerClosesWithError(t *testing.T) {
	c := rawServer(t, func(p *rawPeer) {
		assert.NoError(t, p.write(frame(true, opClose, closePayload(1011, "it broke"))))
		_, _ = p.readUntil(opClose)
	})
	_, err := c.Read(make([]byte, 1))
	var ce *CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, CloseError{Code: 1011, Reason: "it broke"}, *ce)
}

// Close sends 1000 and waits for the server's close frame, reading past
// the data that came before it, then closes the connection.
func TestClientCloses(t *testing.T) {
	closed := make(chan error, 1)
	c := rawServer(t, func(p *rawPeer) {
		f, err := p.readUntil(opClose)
		assert.NoError(t, err)
		assert.Equal(t, closePayload(closeNormal, ""), f.payload)
		assert.NoError(t, p.write(frame(true, opBinary, make([]byte, 300<<10)), frame(true, opClose, f.payload)))
		_, err = p.br.ReadByte()
		closed <- err
	})
	_, err := c.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-closed, io.EOF, "the client closed the connection after the handshake")
	require.NoError(t, c.Close(), "Close again")
	_, err = c.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed)
}

// Close while a Read is blocked ends the Read; when the server answers
// the close frame, with io.EOF.
func TestCloseDuringRead(t *testing.T) {
	c := rawServer(t, func(p *rawPeer) {
		f, err := p.readUntil(opClose)
		assert.NoError(t, err)
		assert.NoError(t, p.write(frame(true, opClose, f.payload)))
	})
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		read <- err
	}()
	require.Eventually(t, func() bool { return readBlocked(c) }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	err := <-read
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed), "%v", err)
}

// A server that never answers the close frame, nor reads, does not hold
// Close or a blocked Read or Write for more than closeTimeout.
func TestCloseWithSilentServer(t *testing.T) {
	release := make(chan struct{})
	c := rawServer(t, func(p *rawPeer) { <-release })
	defer close(release)
	read, write := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		read <- err
	}()
	go func() {
		_, err := c.Write(make([]byte, 16<<20))
		write <- err
	}()
	require.Eventually(t, func() bool { return len(c.wlock) == 1 && readBlocked(c) }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-read, net.ErrClosed)
	assert.Error(t, <-write)
}

// A frame no server may send fails Read with a protocol error, and the
// client closes with 1002 (1003 for a text message).
func TestProtocolErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		frames [][]byte
		code   int
	}{
		"masked":                 {[][]byte{{0x82, 0x81, 1, 2, 3, 4, 'x'}}, closeProtocol},
		"reserved bit":           {[][]byte{{0xC2, 0}}, closeProtocol},
		"reserved opcode":        {[][]byte{frame(true, 0x3, nil)}, closeProtocol},
		"fragmented ping":        {[][]byte{frame(false, opPing, nil)}, closeProtocol},
		"long ping":              {[][]byte{frame(true, opPing, make([]byte, 126))}, closeProtocol},
		"lone continuation":      {[][]byte{frame(true, opContinuation, []byte("x"))}, closeProtocol},
		"message in a message":   {[][]byte{frame(false, opBinary, nil), frame(true, opBinary, nil)}, closeProtocol},
		"close of 1 byte":        {[][]byte{frame(true, opClose, []byte{3})}, closeProtocol},
		"length of 2^63":         {[][]byte{{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}}, closeProtocol},
		"text message":           {[][]byte{frame(true, opText, []byte("hi"))}, closeUnsupported},
		"close reason not UTF-8": {[][]byte{frame(true, opClose, closePayload(closeNormal, "\xff"))}, closeProtocol},
	} {
		t.Run(name, func(t *testing.T) {
			got := make(chan rawFrame, 1)
			c := rawServer(t, func(p *rawPeer) {
				assert.NoError(t, p.write(tc.frames...))
				f, err := p.readUntil(opClose)
				assert.NoError(t, err)
				got <- f
			})
			_, err := c.Read(make([]byte, 10))
			require.ErrorIs(t, err, ErrProtocol)
			f := <-got
			assert.Equal(t, tc.code, int(binary.BigEndian.Uint16(f.payload)))
			_, err = c.Read(make([]byte, 10))
			assert.ErrorIs(t, err, ErrProtocol, "the error stays")
		})
	}
}

// A deadline that passes in the middle of a frame header leaves the
// stream where it was: the next Read reads the frame.
func TestReadDeadlineInHeader(t *testing.T) {
	next := make(chan struct{})
	c := rawServer(t, func(p *rawPeer) {
		f := frame(true, opBinary, []byte(strings.Repeat("y", 300)))
		assert.NoError(t, p.write(f[:3]))
		<-next
		assert.NoError(t, p.write(f[3:]))
		_, _ = p.readUntil(opClose)
	})
	require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err := c.Read(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	close(next)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	got := make([]byte, 300)
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("y", 300), string(got))
}

// A connection cut without a close frame is an unexpected EOF, not the
// end of the stream.
func TestCutWithoutClose(t *testing.T) {
	c := rawServer(t, func(p *rawPeer) {
		assert.NoError(t, p.write(frame(true, opBinary, []byte("abc"))[:4]))
	})
	_, err := io.ReadAll(c)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// readBlocked reports whether a Read holds c's read side.
func readBlocked(c *Conn) bool {
	if c.readMu.TryLock() {
		c.readMu.Unlock()
		return false
	}
	return true
}
