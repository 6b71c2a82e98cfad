package tunnels

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/sandbox-executor/sandbox-executor/internal/relay"
)

// Tunnel is one open tunnel, from Registry.Open. Its fields are set by
// Open; backend, clientSide, joined, closed and released are guarded by
// the Registry's mu.
type Tunnel struct {
	r       *Registry
	id      uint64
	kind    Kind
	port    int
	client  string // the far end, for List
	started time.Time
	cancel  context.CancelFunc // aborts the dial

	backend    net.Conn     // the target side; nil while dialling
	clientSide relay.Stream // set by Join
	joined     bool         // Join was called
	closed     bool         // Close was called
	released   bool         // removed from the Registry

	// toPort and fromPort are the bytes moved each way, set when Join
	// ends; List asks the kernel while the tunnel is open.
	toPort, fromPort atomic.Int64
}

// Info describes an open tunnel.
type Info struct {
	ID      uint64    // unique in the Registry's life, from 1
	Kind    Kind      // how the client came
	Port    int       // the target port
	Target  string    // the address dialled, as 127.0.0.1:22
	Client  string    // the client's address, as Open was given it
	Started time.Time // when it was opened
	// ToPort and FromPort are the bytes moved so far from the client to
	// the port and back.
	ToPort, FromPort int64
}

// ID returns the tunnel's id, as List reports it.
func (t *Tunnel) ID() uint64 { return t.id }

// Join moves bytes between client and the target until both directions
// have ended, then closes both and releases the tunnel; see relay.Join
// for half-closes. prefix, if not empty, is sent to the target first: the
// bytes a client sent after its request that the server had already
// buffered. For splice(2), client should be the *net.TCPConn itself.
//
// Join runs in the caller's goroutine and returns when the tunnel has
// ended: both sides closed, or either one failed, or Tunnel.Close or
// Registry.Close was called. It returns ErrClosed at once, having closed
// client, if the tunnel was closed before it began.
func (t *Tunnel) Join(client relay.Stream, prefix []byte) error {
	defer t.r.release(t)
	if !t.start(client) {
		client.Close()
		return ErrClosed
	}
	start := time.Now()
	var toPort, fromPort int64
	var err error
	if len(prefix) > 0 {
		var n int
		n, err = t.backend.Write(prefix)
		toPort = int64(n)
	}
	if err == nil {
		var up, down int64
		up, down, err = relay.Join(client, t.backend)
		toPort, fromPort = toPort+up, down
	} else {
		client.Close()
		t.backend.Close()
	}
	t.toPort.Store(toPort)
	t.fromPort.Store(fromPort)
	ev := t.r.Log.Info()
	if err != nil {
		ev = ev.AnErr("ended_by", err)
	}
	ev.Uint64("tunnel", t.id).Str("kind", string(t.kind)).Int("port", t.port).Str("client", t.client).
		Int64("bytes_to_port", toPort).Int64("bytes_from_port", fromPort).Dur("duration", time.Since(start)).
		Msg("tunnel closed")
	return nil
}

// start records client as t's client side. It reports false if t was
// closed first.
func (t *Tunnel) start(client relay.Stream) bool {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.joined = true
	if t.closed {
		return false
	}
	t.clientSide = client
	return true
}

// Close ends the tunnel: it closes both sides, so that a Join in progress
// returns, and releases a tunnel that was never joined. It is safe to call
// more than once, and concurrently with Join.
func (t *Tunnel) Close() {
	t.r.mu.Lock()
	t.closed = true
	backend, client, joined := t.backend, t.clientSide, t.joined
	t.r.mu.Unlock()
	t.cancel()
	if backend != nil {
		backend.Close()
	}
	if client != nil {
		client.Close()
	}
	if !joined {
		t.r.release(t)
	}
}

// info describes t, whose target side is backend: the bytes moved come
// from the kernel's count for backend while it is open (which keeps the
// copies free to splice), else from Join's.
func (t *Tunnel) info(backend net.Conn) Info {
	in := Info{ID: t.id, Kind: t.kind, Port: t.port, Target: backend.RemoteAddr().String(),
		Client: t.client, Started: t.started, ToPort: t.toPort.Load(), FromPort: t.fromPort.Load()}
	if sent, received, ok := socketBytes(backend); ok {
		in.ToPort, in.FromPort = max(in.ToPort, sent), max(in.FromPort, received)
	}
	return in
}
