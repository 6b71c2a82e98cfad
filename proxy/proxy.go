// Package proxy forwards TCP connections from one listener to a single
// port on the loopback interface that can be bound, unbound and rebound
// at run time. It knows nothing about HTTP; the server package maps its
// sentinel errors to status codes.
package proxy

import (
	"context"
	"errors"
	"fmt"

	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/internal/relay"
	"github.com/sandbox-executor/sandbox-executor/internal/waitgroup"
)

// Errors returned by Forwarder. Match them with errors.Is.
var (
	// ErrAlreadyBound is returned by Bind while a port is bound.
	ErrAlreadyBound = errors.New("port already bound")
	// ErrInvalidPort is returned by Bind for a port outside 1..65535.
	ErrInvalidPort = errors.New("port must be between 1 and 65535")
	// ErrReservedPort is returned by Bind for a port of the agent's own:
	// one in Reserved, or that of a listener being served. Forwarding
	// to it would loop, each connection dialling the proxy again until
	// no file descriptor is left.
	ErrReservedPort = errors.New("port is reserved by the agent")
	// ErrClosed is returned by Serve after Close.
	ErrClosed = errors.New("proxy: forwarder closed")
)

const (
	defaultDialTimeout = 5 * time.Second
	maxAcceptBackoff   = time.Second
)

// Forwarder accepts TCP connections on the listeners given to Serve and
// forwards each to the bound port on the loopback interface: 127.0.0.1
// first, then [::1] if IPv4 refuses. A connection accepted while no port
// is bound is closed at once.
//
// A Forwarder never forwards to its own ports: the port of a listener
// it serves, or one listed in Reserved. Bind refuses them, and a
// connection that would reach one anyway (a listener served after Bind)
// is closed instead of dialled.
//
// The zero value is ready to use, with no port bound. Set DialTimeout,
// Reserved and Log before the first Bind or Serve; they are not guarded. A Forwarder must
// not be copied after first use. Its methods are safe for concurrent use.
type Forwarder struct {
	// DialTimeout bounds the dial to the bound port.
	// If zero, 5 s is used.
	DialTimeout time.Duration

	// Reserved lists ports that must never be bound, besides those of
	// the listeners being served, which are refused without being
	// listed: the agent's API port, for one. Nil reserves none.
	Reserved []int

	// Log receives one warning per failed dial, and one per Accept
	// error that Serve retries (such as running out of file
	// descriptors). The zero value, like zerolog.Nop(), discards
	// everything.
	Log zerolog.Logger

	// mu guards port, conns, lns, closed and done. Holding it while a
	// connection is registered and while Unbind or Close takes the set
	// means no connection of an old binding survives: it is either in
	// conns when they are closed, or it sees the new state and closes
	// itself.
	mu     sync.Mutex
	port   int                       // 0 while unbound
	conns  map[*conn]struct{}        // live forwarded connections
	lns    map[net.Listener]struct{} // listeners being served
	closed bool                      // set once by Close
	done   chan struct{}             // closed by Close; wakes Serve's accept backoff

	// wg counts running Serve calls; each Serve waits for its own
	// connection goroutines, so waiting for wg waits for all of them.
	wg sync.WaitGroup

	// The counters of Stats.
	forwarded  atomic.Uint64 // connections tracked for forwarding
	dialFailed atomic.Uint64
	bytesIn    atomic.Int64 // from clients to the bound port
	bytesOut   atomic.Int64 // from the bound port to clients
}

// Stats are a Forwarder's counts, for metrics.
type Stats struct {
	Open       int    // connections being forwarded now
	Total      uint64 // connections accepted for forwarding since the Forwarder was created
	DialFailed uint64 // of those, the ones whose dial to the bound port failed
	// BytesIn counts the bytes from clients to the bound port, BytesOut
	// those back. A connection's bytes are counted as they pass, in
	// chunks of at most relay.CountChunk.
	BytesIn, BytesOut uint64
}

// Stats returns the Forwarder's counts now.
func (f *Forwarder) Stats() Stats {
	f.mu.Lock()
	open := len(f.conns)
	f.mu.Unlock()
	return Stats{Open: open, Total: f.forwarded.Load(), DialFailed: f.dialFailed.Load(),
		BytesIn: uint64(f.bytesIn.Load()), BytesOut: uint64(f.bytesOut.Load())}
}

// conn is one forwarded connection. The Forwarder's mu guards backend.
type conn struct {
	client  net.Conn           // accepted connection
	backend net.Conn           // nil until the dial succeeds
	cancel  context.CancelFunc // aborts the dial
}

// close closes both sides and aborts a dial in progress. It is safe to
// call more than once; backend must be read under the Forwarder's mu.
func (c *conn) close(backend net.Conn) {
	c.cancel()
	c.client.Close()
	if backend != nil {
		backend.Close()
	}
}

func (f *Forwarder) dialTimeout() time.Duration {
	if f.DialTimeout > 0 {
		return f.DialTimeout
	}
	return defaultDialTimeout
}

// Bind sets the port that new connections are forwarded to. It returns
// an error wrapping ErrInvalidPort if port is outside 1..65535, one
// wrapping ErrReservedPort if port is one of the Forwarder's own, and
// one wrapping ErrAlreadyBound if a port is already bound; call Unbind
// first.
func (f *Forwarder) Bind(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("bind %d: %w", port, ErrInvalidPort)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ownPortLocked(port) {
		return fmt.Errorf("bind %d: %w", port, ErrReservedPort)
	}
	if f.port != 0 {
		return fmt.Errorf("bind %d: %w (current port %d)", port, ErrAlreadyBound, f.port)
	}
	f.port = port
	return nil
}

// ownPortLocked reports whether port is in Reserved or is the port of a
// listener being served. f.mu must be held.
func (f *Forwarder) ownPortLocked(port int) bool {
	if slices.Contains(f.Reserved, port) {
		return true
	}
	for ln := range f.lns {
		if a, ok := ln.Addr().(*net.TCPAddr); ok && a.Port == port {
			return true
		}
	}
	return false
}

// Unbind removes the binding and closes every live forwarded connection.
// It returns the old port and whether one was bound. It never fails.
func (f *Forwarder) Unbind() (int, bool) {
	f.mu.Lock()
	old := f.port
	f.port = 0
	closeAll := f.takeConnsLocked()
	f.mu.Unlock()
	closeAll()
	return old, old != 0
}

// Port returns the bound port and whether one is bound.
func (f *Forwarder) Port() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.port, f.port != 0
}

// takeConnsLocked empties conns and returns a function that closes what
// it held, to be called after f.mu is released. f.mu must be held.
func (f *Forwarder) takeConnsLocked() func() {
	type pair struct {
		c       *conn
		backend net.Conn
	}
	taken := make([]pair, 0, len(f.conns))
	for c := range f.conns {
		taken = append(taken, pair{c, c.backend})
	}
	clear(f.conns)
	return func() {
		for _, p := range taken {
			p.c.close(p.backend)
		}
	}
}

// Serve accepts connections on ln and forwards them until ln is closed
// or Close is called. Serve takes ownership of ln and closes it before
// returning. It returns nil after Close, ErrClosed if Close came first,
// and otherwise the error from Accept (net.ErrClosed if the caller
// closed ln). Before returning it waits for the connections it accepted
// to end; Unbind or Close ends them early. Serve may be called for
// several listeners at once.
func (f *Forwarder) Serve(ln net.Listener) error {
	defer ln.Close()
	if !f.addListener(ln) {
		return ErrClosed
	}
	defer f.wg.Done()
	defer f.removeListener(ln)

	var conns sync.WaitGroup
	defer conns.Wait()
	var backoff time.Duration
	for {
		client, err := ln.Accept()
		if err != nil {
			if f.isClosed() {
				return nil
			}
			if !isTemporary(err) {
				return err
			}
			// Out of file descriptors or buffers: wait for connections
			// to end instead of spinning, as net/http's Server does.
			backoff = min(max(2*backoff, 5*time.Millisecond), maxAcceptBackoff)
			f.Log.Warn().Err(err).Float64("retry_in_ms", float64(backoff.Milliseconds())).Msg("proxy: accept failed")
			if !f.sleep(backoff) {
				return nil
			}
			continue
		}
		backoff = 0
		ctx, c, port, ok := f.track(client)
		if !ok {
			client.Close() // no port bound, or closed
			continue
		}
		conns.Add(1)
		go f.forward(ctx, &conns, c, port)
	}
}

// isTemporary reports whether an Accept error may clear by itself.
// Go's accept already retries ECONNABORTED and EINTR.
func isTemporary(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// addListener registers ln for Close and counts the Serve call in f.wg.
// It reports false after Close.
func (f *Forwarder) addListener(ln net.Listener) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if f.lns == nil {
		f.lns = make(map[net.Listener]struct{})
	}
	f.lns[ln] = struct{}{}
	// Add happens under mu and only before closed is set, so it never
	// races with the Wait in Close.
	f.wg.Add(1)
	return true
}

func (f *Forwarder) removeListener(ln net.Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.lns, ln)
}

func (f *Forwarder) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// sleep waits for d and reports false if Close was called meanwhile.
func (f *Forwarder) sleep(d time.Duration) bool {
	f.mu.Lock()
	done := f.doneLocked()
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// doneLocked returns the channel that Close closes. f.mu must be held.
func (f *Forwarder) doneLocked() chan struct{} {
	if f.done == nil {
		f.done = make(chan struct{})
	}
	return f.done
}

// track registers client as a live connection of the current binding
// and returns it with the port to dial and the context for the dial,
// which Unbind and Close cancel. It reports false if no port is bound,
// the bound port is one of the Forwarder's own, or the Forwarder is
// closed; the caller then closes client.
func (f *Forwarder) track(client net.Conn) (context.Context, *conn, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.port == 0 {
		return nil, nil, 0, false
	}
	// Bind refuses these ports, but a listener served after Bind can
	// still bring its own port in; checking here too means no path
	// leads to the loop.
	if f.ownPortLocked(f.port) {
		f.Log.Warn().Int("port", f.port).Msg("proxy: bound port is the proxy's own; connection refused")
		return nil, nil, 0, false
	}
	// Not a request context: the dial belongs to this connection alone.
	ctx, cancel := context.WithTimeout(context.Background(), f.dialTimeout())
	c := &conn{client: client, cancel: cancel}
	if f.conns == nil {
		f.conns = make(map[*conn]struct{})
	}
	f.conns[c] = struct{}{}
	f.forwarded.Add(1)
	return ctx, c, f.port, true
}

// attach records backend as c's other side. It reports false if Unbind
// or Close took c meanwhile; the caller then closes backend.
func (f *Forwarder) attach(c *conn, backend net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.conns[c]; !ok {
		return false
	}
	c.backend = backend
	return true
}

// untrack removes c, if Unbind or Close has not, and closes both sides.
func (f *Forwarder) untrack(c *conn) {
	f.mu.Lock()
	delete(f.conns, c)
	backend := c.backend
	f.mu.Unlock()
	c.close(backend)
}

// forward dials port for c and copies both ways, then closes both sides.
//
// forward runs in its own goroutine, one per accepted connection; it
// ends when the dial fails or when both copies have ended. wg is the
// accepting Serve call's count of these goroutines.
func (f *Forwarder) forward(ctx context.Context, wg *sync.WaitGroup, c *conn, port int) {
	defer wg.Done()
	defer f.untrack(c)
	backend, err := relay.DialLoopback(ctx, port)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) { // canceled: Unbind or Close, not a failure
			f.dialFailed.Add(1)
			f.Log.Warn().Err(err).Int("port", port).Msg("proxy: dial failed")
		}
		return
	}
	if !f.attach(c, backend) {
		backend.Close()
		return
	}
	// Join closes both sides when either copy fails (a reset, or a close
	// by Unbind or Close), and both at the end.
	_, _, _ = relay.JoinCounting(c.client, backend, relay.Counts{AToB: &f.bytesIn, BToA: &f.bytesOut})
}

// Close stops every Serve call, closing their listeners, closes every
// live forwarded connection, and waits for all goroutines the Forwarder
// started. If ctx ends first Close returns ctx.Err(); the goroutines
// still end, since their connections are closed. After Close, Serve
// returns ErrClosed and accepted connections are refused. Close may be
// called more than once.
func (f *Forwarder) Close(ctx context.Context) error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.doneLocked())
	}
	lns := make([]net.Listener, 0, len(f.lns))
	for ln := range f.lns {
		lns = append(lns, ln)
	}
	closeAll := f.takeConnsLocked()
	f.mu.Unlock()

	for _, ln := range lns {
		ln.Close()
	}
	closeAll()
	// Closing the listeners and connections makes every Serve call
	// return promptly.
	return waitgroup.Wait(ctx, &f.wg)
}
