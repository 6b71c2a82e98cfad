package wsclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
	"unicode/utf8"
)

// nextFrameLocked reads frame headers until that of a data frame, which
// it leaves c.msg set to, and handles the control frames before it. It
// returns the error Read returns; c.readMu must be held.
//
// Headers are peeked, not consumed, until whole: a timeout in the middle
// of one leaves the stream where it was.
func (c *Conn) nextFrameLocked() error {
	peek, err := c.br.Peek(2)
	if err != nil {
		return c.readFailedLocked(err)
	}
	h, size, need, err := parseHeader(peek)
	if err == nil && need > len(peek) {
		if peek, err = c.br.Peek(need); err != nil {
			return c.readFailedLocked(err)
		}
		h, size, _, err = parseHeader(peek)
	}
	if err != nil {
		return c.failLocked(closeProtocol, err)
	}
	if !isControl(h.opcode) {
		_, _ = c.br.Discard(size)
		return c.dataFrameLocked(h)
	}
	frame, err := c.br.Peek(size + int(h.length)) // the buffer holds any control frame
	if err != nil {
		return c.readFailedLocked(err)
	}
	payload := append([]byte(nil), frame[size:]...)
	_, _ = c.br.Discard(len(frame))
	switch h.opcode {
	case opPing:
		c.queueControl(&c.pong, payload)
	case opClose:
		return c.closeFrameLocked(payload)
	}
	return nil // a pong: the agent's pings are answered, never sent
}

// dataFrameLocked starts reading the data frame of h. A text message is
// refused: the agent sends binary ones only, and a text message would
// have to be checked for UTF-8 to be accepted.
func (c *Conn) dataFrameLocked(h header) error {
	switch {
	case h.opcode == opContinuation && !c.inMessage:
		return c.failLocked(closeProtocol, fmt.Errorf("%w: a continuation frame outside a message", ErrProtocol))
	case h.opcode != opContinuation && c.inMessage:
		return c.failLocked(closeProtocol, fmt.Errorf("%w: a new message before the last one ended", ErrProtocol))
	case h.opcode == opText:
		return c.failLocked(closeUnsupported, fmt.Errorf("%w: a text message (a tunnel carries binary ones)", ErrProtocol))
	}
	c.inMessage = !h.fin
	c.msg = h.length
	return nil
}

// closeFrameLocked handles the server's close frame: it queues the reply
// (the same code) and ends reading with io.EOF, or a *CloseError for a
// code that is not a normal end.
func (c *Conn) closeFrameLocked(payload []byte) error {
	code, reason := closeNoStatus, ""
	switch {
	case len(payload) == 1:
		return c.failLocked(closeProtocol, fmt.Errorf("%w: a close frame of 1 byte", ErrProtocol))
	case len(payload) >= 2:
		code, reason = int(binary.BigEndian.Uint16(payload)), string(payload[2:])
		if !utf8.ValidString(reason) {
			return c.failLocked(closeProtocol, fmt.Errorf("%w: a close reason that is not UTF-8", ErrProtocol))
		}
	}
	reply := []byte{}
	if code != closeNoStatus {
		reply = binary.BigEndian.AppendUint16(reply, uint16(code))
	}
	c.queueControl(&c.closing, reply)
	err := error(io.EOF)
	if code != closeNormal && code != closeGoingAway && code != closeNoStatus {
		err = &CloseError{Code: code, Reason: reason}
	}
	c.endReadLocked(err)
	return err
}

// failLocked ends reading with err, after queueing a close frame with
// code for the server.
func (c *Conn) failLocked(code int, err error) error {
	c.queueControl(&c.closing, binary.BigEndian.AppendUint16(nil, uint16(code)))
	c.endReadLocked(err)
	return err
}

// readFailedLocked returns the error for err from reading nc: a timeout
// leaves the connection as it was; any other error ends reading.
func (c *Conn) readFailedLocked(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("websocket: the connection ended without a close frame: %w", io.ErrUnexpectedEOF)
	}
	if c.closed.Load() {
		err = net.ErrClosed
	}
	c.endReadLocked(err)
	return err
}

// endReadLocked makes err the error of every later Read, and tells Close
// that the server will send nothing more.
func (c *Conn) endReadLocked(err error) {
	c.readErr = err
	c.recvOnce.Do(func() { close(c.closeRecv) })
}

// queueControl queues a control frame with payload in *slot (c.pong or
// c.closing), replacing one queued before, and sends it now if no write
// is in progress; else the writer sends it when it lets go of the lock.
func (c *Conn) queueControl(slot **[]byte, payload []byte) {
	c.ctlMu.Lock()
	*slot = &payload
	c.ctlMu.Unlock()
	select {
	case c.wlock <- struct{}{}:
		c.unlockWrite() // which sends it
	default:
	}
}

// controlQueued reports whether a control frame is queued.
func (c *Conn) controlQueued() bool {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	return c.pong != nil || c.closing != nil
}

// flushControlLocked sends the queued control frames: a pong, then a
// close frame. Nothing is sent after a close frame. The write lock must
// be held.
func (c *Conn) flushControlLocked() {
	c.ctlMu.Lock()
	pong, closing := c.pong, c.closing
	c.pong, c.closing = nil, nil
	c.ctlMu.Unlock()
	if pong != nil && !c.closeSent {
		_ = c.writeControlLocked(opPong, *pong)
	}
	if closing != nil && !c.closeSent {
		_ = c.writeControlLocked(opClose, *closing)
	}
}

// writeControlLocked writes a control frame (its payload at most
// maxControl bytes), as sendLocked does. The write lock must be held.
func (c *Conn) writeControlLocked(opcode byte, payload []byte) error {
	var buf [maxHeader + maxControl]byte
	return c.sendLocked(opcode, buf[:maxHeader+len(payload)], payload)
}

// Close sends a close frame (1000) unless one was sent, waits for the
// server's (reading and dropping data until it comes) so that the server
// sees a clean close, then closes the connection. Each wait is bounded by
// closeTimeout: Close never blocks for long. A Read or Write blocked
// meanwhile returns; later ones fail with net.ErrClosed. Close may be
// called more than once, and from any goroutine; it returns the error of
// closing the connection.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Conn) close() error {
	c.closed.Store(true)
	deadline := time.Now().Add(closeTimeout)
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case c.wlock <- struct{}{}:
		c.flushControlLocked()
		if !c.closeSent {
			_ = c.nc.SetWriteDeadline(deadline)
			_ = c.writeControlLocked(opClose, binary.BigEndian.AppendUint16(nil, closeNormal))
		}
		<-c.wlock
	case <-t.C:
		// A write is blocked (the server does not read): no close frame
		// can follow the frame it is cutting short.
		return c.nc.Close()
	}
	if c.readMu.TryLock() {
		c.drainLocked(deadline)
		c.readMu.Unlock()
	} else {
		// A Read is in progress: it reads the server's close frame.
		select {
		case <-c.closeRecv:
		case <-t.C:
		}
	}
	return c.nc.Close()
}

// drainLocked reads and drops data until the server's close frame, the
// end of reading, or deadline.
func (c *Conn) drainLocked(deadline time.Time) {
	_ = c.nc.SetReadDeadline(deadline)
	for c.readErr == nil {
		if c.msg == 0 {
			if err := c.nextFrameLocked(); err != nil {
				return
			}
			continue
		}
		n, err := c.br.Discard(int(min(c.msg, readBufferSize)))
		c.msg -= int64(n)
		if err != nil {
			return
		}
	}
}
