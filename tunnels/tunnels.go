// Package tunnels keeps the agent's tunnels: byte streams between a client
// (a hijacked CONNECT connection, a WebSocket) and a TCP port on the
// sandbox's loopback interface. A Registry caps how many are open at once,
// refuses every target but loopback and the agent's own ports, lists the
// open tunnels with the bytes they moved, and closes them all at shutdown.
// It knows nothing about HTTP; the server package maps its sentinel errors
// to status codes.
package tunnels

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/internal/relay"
	"github.com/sandbox-executor/sandbox-executor/internal/waitgroup"
)

// Errors returned by Open. Match them with errors.Is.
var (
	// ErrInvalidPort is a port outside 1..65535.
	ErrInvalidPort = errors.New("port must be between 1 and 65535")
	// ErrNotLoopback is a target address that is not a loopback one:
	// tunnels reach the sandbox's own services, never another host.
	ErrNotLoopback = errors.New("tunnels reach the sandbox's loopback interface only")
	// ErrReservedPort is one of the agent's own ports (Reserved): a
	// tunnel to the API would let a tunnel open tunnels, without end.
	ErrReservedPort = errors.New("port is reserved by the agent")
	// ErrTooMany is returned while Max tunnels are open.
	ErrTooMany = errors.New("too many tunnels open")
	// ErrRefused means nothing listens on the port.
	ErrRefused = errors.New("nothing is listening on the port")
	// ErrClosed is returned after Close, and by Join for a tunnel that
	// Close or Tunnel.Close ended first.
	ErrClosed = errors.New("tunnel closed")
)

const (
	defaultMax         = 1024
	defaultDialTimeout = 5 * time.Second
)

// Target is where a tunnel goes: Port on the loopback interface, at IP if
// IP is valid (127.0.0.1, ::1, any loopback address), else at 127.0.0.1
// and then [::1] if IPv4 refuses ("localhost", or no address given).
type Target struct {
	IP   netip.Addr
	Port int
}

// Kind says how a tunnel's client reached the agent.
type Kind string

// The kinds of tunnel.
const (
	Connect   Kind = "connect" // an HTTP CONNECT request, hijacked
	WebSocket Kind = "ws"      // a WebSocket carrying the bytes in binary messages
)

// Registry opens, tracks and closes tunnels. The zero value is ready to
// use: at most 1024 tunnels, no port reserved. Set Max, Reserved,
// DialTimeout and Log before the first Open; they are not guarded. Its
// methods are safe for concurrent use.
type Registry struct {
	// Max caps the tunnels open at once, those still dialling included.
	// If zero, 1024.
	Max int
	// Reserved lists the agent's own ports, which Open refuses: the API
	// and the TCP proxy. Nil reserves none.
	Reserved []int
	// DialTimeout bounds the dial to the target. If zero, 5 s.
	DialTimeout time.Duration
	// Log receives a line per tunnel closed, and per failed dial at debug
	// level. The zero value discards everything.
	Log zerolog.Logger

	// mu guards open, lastID, closed, and the state of every Tunnel in
	// open (see Tunnel): holding it while a tunnel is registered and
	// while Close takes the set means no tunnel outlives Close.
	mu     sync.Mutex
	open   map[*Tunnel]struct{}
	lastID uint64
	closed bool

	// wg counts the tunnels from Open until they are released (by Join's
	// end, or by Tunnel.Close of one never joined).
	wg sync.WaitGroup
}

func (r *Registry) max() int {
	if r.Max > 0 {
		return r.Max
	}
	return defaultMax
}

func (r *Registry) dialTimeout() time.Duration {
	if r.DialTimeout > 0 {
		return r.DialTimeout
	}
	return defaultDialTimeout
}

// IsReserved reports whether port is one of Reserved.
func (r *Registry) IsReserved(port int) bool { return slices.Contains(r.Reserved, port) }

// Open checks the target, takes a slot and dials the target. client names
// the far end for List (its address). ctx bounds the dial only: a client
// that leaves while the target is dialled aborts it.
//
// The returned Tunnel must end with Join (which the caller runs once it
// has told its client the tunnel is open) or Close. The errors wrap
// ErrInvalidPort, ErrNotLoopback, ErrReservedPort, ErrTooMany, ErrClosed,
// ErrRefused (nothing listening), or are the dial's own (a timeout wraps
// context.DeadlineExceeded).
func (r *Registry) Open(ctx context.Context, kind Kind, to Target, client string) (*Tunnel, error) {
	if to.Port < 1 || to.Port > 65535 {
		return nil, fmt.Errorf("tunnel to port %d: %w", to.Port, ErrInvalidPort)
	}
	if to.IP.IsValid() && !to.IP.Unmap().IsLoopback() {
		return nil, fmt.Errorf("tunnel to %s: %w", to.IP, ErrNotLoopback)
	}
	t, ctx, err := r.add(ctx, kind, to.Port, client)
	if err != nil {
		return nil, err
	}
	backend, err := dial(ctx, to)
	t.cancel()
	if err != nil {
		r.release(t)
		r.Log.Debug().Err(err).Int("port", to.Port).Msg("tunnel: dial failed")
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("tunnel to port %d: %w", to.Port, ErrRefused)
		}
		return nil, fmt.Errorf("tunnel to port %d: %w", to.Port, err)
	}
	if !r.attach(t, backend) {
		backend.Close()
		r.release(t)
		return nil, fmt.Errorf("tunnel to port %d: %w", to.Port, ErrClosed)
	}
	return t, nil
}

// add registers a new tunnel to port, not yet dialled, and returns it
// with the context of its dial, which Close cancels.
func (r *Registry) add(ctx context.Context, kind Kind, port int, client string) (*Tunnel, context.Context, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return nil, nil, fmt.Errorf("tunnel to port %d: %w", port, ErrClosed)
	case r.IsReserved(port):
		return nil, nil, fmt.Errorf("tunnel to port %d: %w", port, ErrReservedPort)
	case len(r.open) >= r.max():
		return nil, nil, fmt.Errorf("%w (limit %d)", ErrTooMany, r.max())
	}
	ctx, cancel := context.WithTimeout(ctx, r.dialTimeout())
	r.lastID++
	t := &Tunnel{r: r, id: r.lastID, kind: kind, port: port, client: client, started: time.Now(), cancel: cancel}
	if r.open == nil {
		r.open = make(map[*Tunnel]struct{})
	}
	r.open[t] = struct{}{}
	// Add happens under mu and only before closed is set, so it never
	// races with the Wait in Close.
	r.wg.Add(1)
	return t, ctx, nil
}

// dial connects to to's port at its address, or on both loopback
// addresses if it has none.
func dial(ctx context.Context, to Target) (net.Conn, error) {
	if !to.IP.IsValid() {
		return relay.DialLoopback(ctx, to.Port)
	}
	var d net.Dialer // ctx carries the timeout
	return d.DialContext(ctx, "tcp", net.JoinHostPort(to.IP.Unmap().String(), strconv.Itoa(to.Port)))
}

// attach records backend as t's target side. It reports false if Close
// ended t meanwhile.
func (r *Registry) attach(t *Tunnel, backend net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed {
		return false
	}
	t.backend = backend
	return true
}

// release removes t from the open tunnels, once.
func (r *Registry) release(t *Tunnel) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	delete(r.open, t)
	r.wg.Done()
}

// List returns the open tunnels, oldest first; those still dialling are
// left out.
func (r *Registry) List() []Info {
	r.mu.Lock()
	ts := make([]*Tunnel, 0, len(r.open))
	backends := make([]net.Conn, 0, len(r.open))
	for t := range r.open {
		if t.backend != nil {
			ts = append(ts, t)
			backends = append(backends, t.backend)
		}
	}
	r.mu.Unlock()
	infos := make([]Info, len(ts))
	for i, t := range ts {
		infos[i] = t.info(backends[i]) // outside mu: it asks the kernel
	}
	slices.SortFunc(infos, func(a, b Info) int { return int(a.ID - b.ID) })
	return infos
}

// Close refuses new tunnels, closes every open one and waits until each is
// released: until every Join has returned. If ctx ends first Close returns
// ctx.Err(); the tunnels still end, since their connections are closed.
// Close may be called more than once.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	ts := make([]*Tunnel, 0, len(r.open))
	for t := range r.open {
		ts = append(ts, t)
	}
	r.mu.Unlock()
	for _, t := range ts {
		t.Close()
	}
	// Closing their connections makes every tunnel's release prompt.
	return waitgroup.Wait(ctx, &r.wg)
}
