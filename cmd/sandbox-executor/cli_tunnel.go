package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/internal/relay"
)

const tunnelDoc = `Opens a tunnel to PORT on the sandbox's loopback interface through the
agent (an HTTP CONNECT, or with -ws a WebSocket, on the agent's own URL).

Without -listen it joins its stdin and stdout to one tunnel, which makes it
an SSH ProxyCommand:
  ssh -o ProxyCommand='sandbox-executor tunnel -url URL -port %p' user@sandbox
With -listen it forwards every connection accepted on ADDR through a tunnel
of its own, a port-forward:
  sandbox-executor tunnel -url URL -port 5432 -listen 127.0.0.1:5432
`

// stdinGrace is how long an interrupted tunnel waits for its read of stdin
// to end: a read of a terminal cannot be interrupted, and the process is
// about to exit anyway.
const stdinGrace = time.Second

// tunnel runs "sandbox-executor tunnel".
func (c *cli) tunnel(ctx context.Context, args []string) error {
	fs := c.flagSet("tunnel", "[flags] -port PORT", tunnelDoc)
	cf := addConnFlags(fs.FlagSet)
	port := fs.Int("port", 0, "the `port` of the sandbox to reach (required)")
	listen := fs.String("listen", "", "forward the connections accepted on this `address` (such as 127.0.0.1:5432) instead of stdin and stdout")
	ws := fs.Bool("ws", false, "tunnel over a WebSocket (GET /tunnel_ws) instead of CONNECT, for edges that do not pass CONNECT")
	rest, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return c.usageError(fs, "unexpected argument %q", rest[0])
	case *port < 1 || *port > 65535:
		return c.usageError(fs, "-port wants the sandbox's port, 1 to 65535")
	}
	cl, err := c.connect(cf, nil)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	t := &tunneler{cl: cl, port: *port, opts: client.DialOptions{WebSocket: *ws}, stderr: &lockedWriter{w: c.stderr}}
	if *listen == "" {
		return t.stdio(ctx, c.stdin, c.stdout)
	}
	return t.listen(ctx, *listen)
}

// tunneler opens the tunnels of one "sandbox-executor tunnel".
type tunneler struct {
	cl     *client.Client
	port   int
	opts   client.DialOptions
	stderr io.Writer // safe for concurrent use
}

// dial opens a tunnel, its errors explained.
func (t *tunneler) dial(ctx context.Context) (net.Conn, error) {
	conn, err := t.cl.DialTunnel(ctx, t.port, t.opts)
	if err == nil {
		return conn, nil
	}
	var ae *client.Error
	switch {
	case errors.Is(err, client.ErrConnectUnsupported):
		return nil, fmt.Errorf("%w: the proxy or load balancer in front of the agent does not pass CONNECT; try -ws, which tunnels over a WebSocket", err)
	case errors.As(err, &ae) && (ae.StatusCode == http.StatusUnauthorized || ae.StatusCode == http.StatusProxyAuthRequired):
		return nil, fmt.Errorf("the agent refused the token (%d): set SANDBOX_SECRET (or -token) to the agent's secret", ae.StatusCode)
	}
	return nil, err
}

// stdio joins in and out to one tunnel until both directions end: in's
// EOF half-closes the tunnel, and the port's EOF closes out.
func (t *tunneler) stdio(ctx context.Context, in io.Reader, out io.Writer) error {
	conn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	s := &stdioStream{in: in, out: out}
	done := make(chan struct{})
	go joinStdio(done, s, conn)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		conn.Close()
		s.Close()
		select {
		case <-done:
		case <-time.After(stdinGrace):
		}
		return ctx.Err()
	}
}

// joinStdio joins s and conn, then closes done.
//
// joinStdio runs in its own goroutine; it ends when both directions have
// ended, which closing conn makes prompt unless a read of in cannot be
// interrupted (a terminal): stdio then returns without it, as the process
// exits.
func joinStdio(done chan<- struct{}, s *stdioStream, conn net.Conn) {
	defer close(done)
	_, _, _ = relay.Join(s, conn)
}

// stdioStream is stdin and stdout as one stream: closing its write side
// closes stdout, so that the reader of a ProxyCommand sees EOF.
type stdioStream struct {
	in  io.Reader
	out io.Writer
}

func (s *stdioStream) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s *stdioStream) Write(p []byte) (int, error) { return s.out.Write(p) }

func (s *stdioStream) CloseWrite() error {
	if c, ok := s.out.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Close closes stdout, and stdin, whose pending read it ends if stdin can
// be interrupted (a pipe or socket the runtime polls).
func (s *stdioStream) Close() error {
	if f, ok := s.in.(*os.File); ok {
		_ = f.SetReadDeadline(time.Now()) // os.ErrNoDeadline for a terminal
	}
	if c, ok := s.in.(io.Closer); ok {
		_ = c.Close()
	}
	return s.CloseWrite()
}

// listen forwards every connection accepted on addr through a tunnel of
// its own, until ctx ends.
func (t *tunneler) listen(ctx context.Context, addr string) error {
	// A refused token would fail every connection: say so now.
	if _, err := t.cl.ListTunnels(ctx); err != nil {
		var ae *client.Error
		if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized {
			return errors.New("the agent refused the token (401): set SANDBOX_SECRET (or -token) to the agent's secret")
		}
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(t.stderr, "sandbox-executor tunnel: forwarding %s to port %d in the sandbox\n", ln.Addr(), t.port)
	f := &forwards{conns: map[net.Conn]struct{}{}}
	stop := context.AfterFunc(ctx, func() { ln.Close(); f.closeAll() })
	defer stop()
	for {
		local, err := ln.Accept()
		if err != nil {
			f.wg.Wait()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if !f.add(local) {
			local.Close() // ctx ended meanwhile
			continue
		}
		f.wg.Add(1)
		go t.forward(ctx, f, local)
	}
}

// forwards are the connections a listening tunnel command is forwarding.
type forwards struct {
	wg sync.WaitGroup // counts the forward goroutines

	// mu guards conns and closed: a connection is either in conns when
	// closeAll runs, or sees closed and is not added.
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (f *forwards) add(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwards) remove(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

func (f *forwards) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
}

// forward joins local to a new tunnel; a tunnel that cannot be opened is
// reported on stderr and local closed.
//
// forward runs in its own goroutine, one per accepted connection; it ends
// when the tunnel has ended, which closing local (as listen does when ctx
// ends) makes prompt. f.wg is its owner's count.
func (t *tunneler) forward(ctx context.Context, f *forwards, local net.Conn) {
	defer f.wg.Done()
	defer f.remove(local)
	defer local.Close()
	remote, err := t.dial(ctx)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(t.stderr, "sandbox-executor tunnel: %s: %v\n", local.RemoteAddr(), err)
		}
		return
	}
	if !f.add(remote) {
		remote.Close()
		return
	}
	defer f.remove(remote)
	_, _, _ = relay.Join(local, remote)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
