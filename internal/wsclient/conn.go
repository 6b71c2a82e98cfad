// Package wsclient is the client end of a WebSocket (RFC 6455) as a
// net.Conn whose bytes travel in binary messages, for tunnels: the bytes
// written go out in binary frames, each masked and written with its header
// in one write(2), and the payload of the server's binary messages is read
// back. It offers no extension (no permessage-deflate) and sends no pings;
// it answers the server's.
package wsclient

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// readBufferSize is the buffer that frame headers are read through;
	// payload is read past it, straight into the caller's buffer, once
	// what it holds is taken.
	readBufferSize = 64 << 10
	// maxFramePayload is the largest frame Write and ReadFrom send: a
	// bigger write goes out in several frames, each in one write(2).
	maxFramePayload = 128 << 10
	// closeTimeout bounds Close: its wait for a Write in progress to end
	// before it sends the close frame, and then for the server's close
	// frame.
	closeTimeout = 2 * time.Second
)

// ErrClosing is returned by Write once the connection's close frame has
// been sent, which it is when the server closed the WebSocket first (Read
// then returns io.EOF) or after a protocol error: no frame may follow it.
var ErrClosing = errors.New("websocket: the connection is closing")

// CloseError is returned by Read when the server closed the WebSocket
// with a code other than 1000 (normal), 1001 (going away) or none, which
// give io.EOF.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("websocket closed by the server: %d %s", e.Code, e.Reason)
}

// Conn is the client end of a WebSocket, from Handshake. Its bytes travel
// in binary messages, in any framing: message boundaries mean nothing.
// Read, Write and Close may be called from different goroutines at once.
// It has no CloseWrite: a WebSocket has no half-close.
type Conn struct {
	nc net.Conn

	// readMu guards br, msg, inMessage and readErr: the read side,
	// which one Read at a time (or Close's drain) moves.
	readMu    sync.Mutex
	br        *bufio.Reader // reads nc; holds at most one frame's header ahead
	msg       int64         // payload bytes left in the current data frame
	inMessage bool          // a data message is open: the next data frame continues it
	readErr   error         // sticky; io.EOF after the server's close frame

	// wlock is held (a value in it) by the one goroutine writing to nc:
	// a channel, so that Close can wait for it with a timeout and the
	// reader can try it without waiting. It guards wbuf, ks, rng,
	// closeSent and writeErr.
	wlock     chan struct{}
	wbuf      []byte // maxHeader bytes of room, then a frame's payload
	ks        [keystreamSize]byte
	rng       *rand.ChaCha8 // mask keys
	closeSent bool
	writeErr  error // sticky

	// ctlMu guards pong and closing: the control frames the reader has
	// queued for whoever next holds wlock, so that the reader never waits
	// for a writer (which may wait for the server, which may wait for
	// the reader).
	ctlMu   sync.Mutex
	pong    *[]byte // the payload of the last ping not answered yet
	closing *[]byte // the payload of the close frame to send, if any

	closed    atomic.Bool   // set by Close: Read and Write fail with net.ErrClosed
	closeRecv chan struct{} // closed when the server's close frame (or a read error) ends reading
	recvOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// newConn returns the Conn on nc whose handshake is done; br is the
// reader the reply was read through, which may hold the first frames.
func newConn(nc net.Conn, br *bufio.Reader, seed [32]byte) *Conn {
	return &Conn{
		nc:        nc,
		br:        br,
		wlock:     make(chan struct{}, 1),
		rng:       rand.NewChaCha8(seed),
		closeRecv: make(chan struct{}),
	}
}

// Read reads the payload of the server's binary messages. It returns
// io.EOF once the server has closed the WebSocket with 1000, 1001 or no
// code (its close frame answered), a *CloseError for another code, an
// error wrapping io.ErrUnexpectedEOF if the connection ended without a
// close frame, and net.ErrClosed after Close. A timeout (a deadline)
// leaves the connection usable.
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	if c.readErr != nil || len(p) == 0 {
		return 0, c.readErr
	}
	for c.msg == 0 {
		if err := c.nextFrameLocked(); err != nil {
			return 0, err
		}
	}
	n := int(min(int64(len(p)), c.msg))
	var err error
	if b := c.br.Buffered(); b > 0 {
		n, err = c.br.Read(p[:min(n, b)]) // from the buffer only
	} else {
		n, err = c.nc.Read(p[:n])
	}
	c.msg -= int64(n)
	if err != nil {
		err = c.readFailedLocked(err)
	}
	return n, err
}

// WriteTo copies the payload of the server's messages to w, through a
// buffer as big as a frame the agent sends, until Read would return
// io.EOF (then WriteTo returns nil) or an error.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, maxFramePayload)
	var written int64
	for {
		n, err := c.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			written += int64(m)
			if werr != nil {
				return written, werr
			}
		}
		if err == io.EOF {
			return written, nil
		}
		if err != nil {
			return written, err
		}
	}
}

// Write sends p in binary frames of up to maxFramePayload bytes, each in
// one write(2). It fails with net.ErrClosed after Close, with ErrClosing
// once a close frame was sent, and with the error of an earlier write
// (including a timeout, which leaves a frame cut short) after one failed.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.lockWrite(); err != nil {
		return 0, err
	}
	defer c.unlockWrite()
	n := 0
	for n < len(p) {
		m := min(len(p)-n, maxFramePayload)
		if c.wbuf == nil {
			c.wbuf = make([]byte, maxHeader+maxFramePayload)
		}
		if err := c.writeFrameLocked(opBinary, c.wbuf[:maxHeader+m], p[n:n+m]); err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// ReadFrom sends what r gives until its EOF, each read from r in a frame
// of its own, read straight into the frame's buffer. The write lock is
// not held while r is read, so that pongs and Close are not held up by
// an idle r.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, maxHeader+maxFramePayload)
	var sent int64
	for {
		n, rerr := r.Read(buf[maxHeader:])
		if n > 0 {
			if err := c.lockWrite(); err != nil {
				return sent, err
			}
			err := c.writeFrameLocked(opBinary, buf[:maxHeader+n], buf[maxHeader:maxHeader+n])
			c.unlockWrite()
			if err != nil {
				return sent, err
			}
			sent += int64(n)
		}
		if rerr == io.EOF {
			return sent, nil
		}
		if rerr != nil {
			return sent, rerr
		}
	}
}

// lockWrite takes the write lock for a data frame, and fails if no data
// frame may be written.
func (c *Conn) lockWrite() error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.wlock <- struct{}{}
	var err error
	switch {
	case c.closed.Load():
		err = net.ErrClosed
	case c.writeErr != nil:
		err = c.writeErr
	case c.closeSent:
		err = ErrClosing
	}
	if err != nil {
		c.unlockWrite()
	}
	return err
}

// unlockWrite releases the write lock, and sends the control frames the
// reader queued meanwhile: the reader, which queues them, tries the lock
// only once, so the holder must look again after it lets go.
func (c *Conn) unlockWrite() {
	for {
		c.flushControlLocked()
		<-c.wlock
		if !c.controlQueued() {
			return
		}
		select {
		case c.wlock <- struct{}{}:
		default:
			return // its holder will send them
		}
	}
}

// writeFrameLocked sends a data frame of payload through frame, as
// sendLocked does, after the control frames queued. The write lock must
// be held.
func (c *Conn) writeFrameLocked(opcode byte, frame, payload []byte) error {
	if c.writeErr != nil {
		return c.writeErr
	}
	c.flushControlLocked()
	if c.closeSent && opcode != opClose {
		return ErrClosing
	}
	return c.sendLocked(opcode, frame, payload)
}

// sendLocked masks payload into frame[maxHeader:] (payload may be that
// very slice, masked in place) and writes it, with its header in the room
// before it, in one write. A failure is the writers' sticky error. The
// write lock must be held.
func (c *Conn) sendLocked(opcode byte, frame, payload []byte) error {
	if c.writeErr != nil {
		return c.writeErr
	}
	key := uint32(c.rng.Uint64())
	mask(frame[maxHeader:], payload, key, &c.ks)
	var hdr [maxHeader]byte
	size := putHeader(&hdr, opcode, len(payload), key)
	copy(frame[maxHeader-size:], hdr[maxHeader-size:])
	if _, err := c.nc.Write(frame[maxHeader-size : maxHeader+len(payload)]); err != nil {
		c.writeErr = err
		return err
	}
	if opcode == opClose {
		c.closeSent = true
	}
	return nil
}

// LocalAddr returns the local address of the connection.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr returns the server's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// SetDeadline sets the deadline of the underlying connection's reads and
// writes. A write that times out leaves a frame cut short: later writes
// fail.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// SetReadDeadline sets the deadline of the underlying connection's reads.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.nc.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline of the underlying connection's
// writes.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }
