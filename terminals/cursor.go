package terminals

import "fmt"

// Cursor reads a terminal's output from an offset on: first the bytes
// kept, then new ones as they arrive. It never holds the terminal up: a
// cursor that falls behind the ring skips what was evicted and is told
// how many bytes that was. Each cursor counts as one client of its
// terminal until it is closed.
type Cursor struct {
	t    *Terminal
	next uint64        // offset of the next byte to return
	wake chan struct{} // capacity 1; see Terminal.wakeLocked
}

// Attach returns a Cursor at offset since (FromOldest: the oldest byte
// kept), or an error wrapping ErrOffset if since is past the end of the
// output so far. A since older than what is kept is allowed: the first
// Read reports the bytes missed. The caller must Close it.
func (t *Terminal) Attach(since uint64) (*Cursor, error) {
	c := &Cursor{t: t, wake: make(chan struct{}, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case since == FromOldest:
		c.next = t.ring.oldest()
	case since > t.ring.end:
		return nil, fmt.Errorf("%w: %d is past the end of the output (%d bytes so far)", ErrOffset, since, t.ring.end)
	default:
		c.next = since
	}
	t.subs[c] = struct{}{}
	return c, nil
}

// Close removes c from its terminal. It is safe to call twice.
func (c *Cursor) Close() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	delete(c.t.subs, c)
}

// syncLocked moves c past the bytes the ring no longer holds, if it is
// behind them, and returns how many bytes it skipped. c.t.mu must be held.
func (c *Cursor) syncLocked() (missed uint64) {
	if oldest := c.t.ring.oldest(); c.next < oldest {
		missed, c.next = oldest-c.next, oldest
	}
	return missed
}

// Read copies into dst, without waiting, the bytes that follow the last
// one c returned, as many as fit. It also returns how many bytes were
// evicted before c could read them (they come before the ones copied),
// and whether the terminal has ended and every byte it wrote has been
// returned or missed. A Read that returns or reports bytes counts as a
// use of the terminal (Spec.OnActivity).
func (c *Cursor) Read(dst []byte) (n int, missed uint64, ended bool) {
	c.t.mu.Lock()
	missed = c.syncLocked()
	n = c.t.ring.readAt(dst, c.next)
	c.next += uint64(n)
	ended = c.t.status != StatusRunning && c.next >= c.t.ring.end
	c.t.mu.Unlock()
	if n > 0 || missed > 0 {
		c.t.used()
	}
	return n, missed, ended
}

// Offset returns where c is: the offset of the next byte Read returns,
// or, if the ring has evicted that byte, of the first byte the next Read
// reports missed. Offset plus the bytes every later Read reports missed
// or returns is always the offset of the byte that follows them.
func (c *Cursor) Offset() uint64 {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.next
}

// Wake returns a channel that receives after new output arrives, the
// terminal ends, or its output is released. Callers Read before each wait
// on it, not after.
func (c *Cursor) Wake() <-chan struct{} { return c.wake }
