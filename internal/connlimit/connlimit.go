// Package connlimit bounds the connections of an HTTP API: how many are
// open at once, how long one may idle before a request on it passes
// authentication, and which goes first when they are too many. It also
// closes a connection after an early reply without resetting it (Linger).
// It knows nothing of HTTP but the 503 it writes to a connection over the
// cap; the server marks a connection authenticated.
package connlimit

import (
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// maxConnsCeiling bounds the default connection cap whatever the fd
	// limit: an idle connection costs its goroutine and buffers, some
	// 10-20 KB, so 4,096 of them stay well inside a small sandbox.
	maxConnsCeiling = 4096
	// rejectWriteTimeout bounds the write of the 503 to a connection over
	// the cap. A new socket's send buffer is empty, so the write does
	// not wait in practice; the bound keeps Accept from ever waiting.
	rejectWriteTimeout = 100 * time.Millisecond
	// LingerTimeout is how long a connection closed after an early reply
	// (a 503 over the cap, a 401, an error before the body was read) may
	// go on sending before it is closed: reading what the client sends
	// meanwhile keeps the close from resetting the connection before the
	// client has read the reply.
	LingerTimeout = time.Second
	// LingerMax caps the drain of such a connection, when what the
	// client still sends is not known, at this much.
	LingerMax = 256 << 10
)

// Listener is a net.Listener that bounds the API's connections. It keeps
// at most a fixed number open at once. A connection is unauthenticated
// until a request on it passes the bearer-token check; until then its
// read deadlines are clamped to a short timeout, and it is the first to
// go when the cap is reached: a new connection then takes the slot of the
// oldest unauthenticated one, which is closed. Only when every slot is
// held by an authenticated connection is a new one answered 503 at once
// and closed. So a client without the token can neither exhaust file
// descriptors nor keep the owner out.
//
// Create it with NewListener; the server marks a connection authenticated
// (Conn.Authenticate) once a request on it passes. Accept never waits for
// anything but the listener underneath.
type Listener struct {
	net.Listener
	max     int           // connections open at once; always positive
	timeout time.Duration // read timeout of unauthenticated connections
	busy    []byte        // the 503 reply to a connection over the cap

	// mu guards open, the list of unauthenticated connections (oldest
	// first, linked through Conn.prev and Conn.next), each Conn's
	// listed and released, lingering and closed: together they decide
	// who holds a slot.
	mu         sync.Mutex
	open       int // connections accepted and not yet released
	head, tail *Conn
	lingering  map[net.Conn]struct{} // rejected connections draining before their close
	closed     bool

	wg sync.WaitGroup // counts the linger goroutines
}

// NewListener wraps ln with a cap of max connections (if zero or less,
// half the fd limit, at most 4,096) and a read timeout of timeout for
// unauthenticated connections. Close closes ln.
func NewListener(ln net.Listener, max int, timeout time.Duration) *Listener {
	if max <= 0 {
		max = defaultMaxConns()
	}
	body := `{"error":"too many connections (limit ` + strconv.Itoa(max) + `): try again later"}` + "\n"
	busy := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n" + body
	return &Listener{Listener: ln, max: max, timeout: timeout, busy: []byte(busy),
		lingering: map[net.Conn]struct{}{}}
}

// defaultMaxConns is half the soft limit on open files (which Go raises
// to the hard limit at start-up), so that commands, background processes
// and the proxy keep the other half; at most maxConnsCeiling.
func defaultMaxConns() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur/2 >= maxConnsCeiling {
		return maxConnsCeiling
	}
	return max(int(rl.Cur/2), 1)
}

// Max returns the cap on connections open at once.
func (l *Listener) Max() int { return l.max }

// Open returns the number of connections holding a slot: accepted, and
// not yet closed or evicted.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept returns the next connection, a *Conn. A connection over the cap
// is answered 503 and closed, and Accept goes on to the next one.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, victim := l.admit(nc)
		if victim != nil {
			victim.Conn.Close() // its slot is c's; its server goroutine sees the close and ends
		}
		if c != nil {
			// Unclamped, the connection would wait for its first request
			// without a deadline: net/http sets none before it unless the
			// server has a ReadHeaderTimeout.
			_ = c.SetReadDeadline(time.Time{})
			return c, nil
		}
		l.reject(nc)
	}
}

// admit gives nc a slot, taking the one of the oldest unauthenticated
// connection (victim, which the caller closes) if none is free. It
// returns a nil Conn if every slot is held by an authenticated one.
func (l *Listener) admit(nc net.Conn) (c, victim *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		victim = l.head
		if victim == nil {
			return nil, nil
		}
		l.unlistLocked(victim)
		victim.released = true
		l.open--
	}
	l.open++
	c = &Conn{Conn: nc, l: l}
	c.prev = l.tail
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	c.listed = true
	return c, victim
}

// unlistLocked removes c from the unauthenticated list, if it is there.
// l.mu must be held.
func (l *Listener) unlistLocked(c *Conn) {
	if !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}

// release gives c's slot back, once.
func (l *Listener) release(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.released {
		c.released = true
		l.unlistLocked(c)
		l.open--
	}
}

// reject answers nc 503 and closes it, after a short drain if a drain slot
// is free (one per 16 connections of the cap), at once otherwise.
func (l *Listener) reject(nc net.Conn) {
	_ = nc.SetWriteDeadline(time.Now().Add(rejectWriteTimeout))
	if _, err := nc.Write(l.busy); err != nil {
		nc.Close()
		return
	}
	l.mu.Lock()
	if l.closed || len(l.lingering) >= max(l.max/16, 1) {
		l.mu.Unlock()
		nc.Close()
		return
	}
	l.lingering[nc] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()
	go l.linger(nc)
}

// linger half-closes nc, drains what the client sends (up to LingerMax)
// for at most LingerTimeout, and closes it.
//
// linger runs in its own goroutine; it ends when the client has closed
// its side, after LingerTimeout, or when the Listener is closed.
func (l *Listener) linger(nc net.Conn) {
	defer l.wg.Done()
	Linger(nc, io.LimitReader(nc, LingerMax))
	nc.Close()
	l.mu.Lock()
	delete(l.lingering, nc)
	l.mu.Unlock()
}

// Linger half-closes c and reads rest, what the client still sends on c,
// to its end or for at most LingerTimeout, so that closing c after an
// early reply does not reset the connection before the client has read
// that reply. rest reads from c: all of it, up to a bound (LingerMax),
// or the rest of a body the client declared. The caller closes c.
func Linger(c net.Conn, rest io.Reader) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(LingerTimeout))
	_, _ = io.Copy(io.Discard, rest) // ends at rest's end, the client's EOF or the deadline
}

// Close closes the listener and the rejected connections still draining,
// and waits for their goroutines. The connections it accepted are the
// http.Server's to close.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	for nc := range l.lingering {
		_ = nc.SetReadDeadline(time.Now()) // ends the drain; linger closes it
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

// Conn is a connection accepted by a Listener. Until a request on it
// passes authentication, its read deadlines are clamped to the Listener's
// short timeout; after, they are what the HTTP server sets, and the
// deadline in force is restored to that. Close gives its slot back.
//
// It forwards ReadFrom, so that a response copied from a file or socket
// keeps sendfile or splice, and CloseWrite. Code that hijacks it (CONNECT
// tunnels, WebSocket) gets the connection underneath with NetConn, e.g.
// to splice between two *net.TCPConn, but must close it through the
// Conn, or the slot is never given back.
type Conn struct {
	net.Conn
	l      *Listener
	authed atomic.Bool // set once, by Authenticate, under mu
	// unclamped is set once, by AllowIdle, under mu: the connection's
	// read deadlines are no longer clamped, though it is still the first
	// to go when the cap is reached.
	unclamped atomic.Bool

	// mu guards want and the switch of authed, so that a deadline set
	// while the connection authenticates is never left clamped.
	mu   sync.Mutex
	want time.Time // the read deadline last asked for; zero means none

	// prev, next, listed and released are guarded by l.mu: see Listener.
	prev, next *Conn
	listed     bool // in the Listener's unauthenticated list
	released   bool // its slot has been given back
}

// NetConn returns the connection underneath, usually a *net.TCPConn.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Authenticated reports whether a request on c has passed authentication.
func (c *Conn) Authenticated() bool { return c.authed.Load() }

// Authenticate marks c as having passed authentication: its slot is no
// longer the first to go, and its read deadline is no longer clamped.
func (c *Conn) Authenticate() {
	if c.authed.Load() {
		return
	}
	c.mu.Lock()
	if !c.authed.Load() {
		c.authed.Store(true)
		_ = c.Conn.SetReadDeadline(c.want)
	}
	c.mu.Unlock()
	c.l.mu.Lock()
	c.l.unlistLocked(c)
	c.l.mu.Unlock()
}

// AllowIdle lifts the clamp on c's read deadlines without authenticating
// it: a public preview (an app's event stream, its WebSocket) may be idle
// for long, but whoever sends one holds no token, so the connection stays
// the first to go when the cap is reached.
func (c *Conn) AllowIdle() {
	if c.authed.Load() || c.unclamped.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.unclamped.Load() {
		c.unclamped.Store(true)
		_ = c.Conn.SetReadDeadline(c.want)
	}
}

// SetReadDeadline sets the read deadline, no later than the Listener's
// timeout from now while c is unauthenticated (and AllowIdle has not
// lifted the clamp).
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want = t
	if !c.authed.Load() && !c.unclamped.Load() {
		if limit := time.Now().Add(c.l.timeout); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// ReadFrom copies r to the connection with the ReadFrom of the connection
// underneath, which for a *net.TCPConn is sendfile or splice.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite half-closes the connection underneath, if it can.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection and gives its slot back.
func (c *Conn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}
