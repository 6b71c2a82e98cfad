// Package h1 is an HTTP/1.1 client transport for the preview proxy: each
// round trip runs in the caller's goroutine, on a kept-alive connection
// to an app in the sandbox.
//
// http.Transport gives every connection a reading and a writing
// goroutine and hands each request and reply between them and the
// caller: some four goroutine switches, and a read that finds nothing,
// per round trip. Behind a reverse proxy on a machine of two vCPUs that
// is a fifth of the proxy's CPU. This transport writes the request and
// reads the reply itself. It takes only what it can do that way
// (bodiless GET, HEAD and OPTIONS, which are nearly every request a
// preview makes) and hands the rest, request bodies that may stream
// both ways while the reply does and WebSocket upgrades among them, to a
// fallback http.Transport.
package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"time"
)

const (
	bufferSize      = 4 << 10
	max1xxResponses = 5 // as http.Transport: more 1xx replies are an error
)

// Transport is an http.RoundTripper; see the package comment. Its zero
// value is not usable: Dial and Fallback are required.
type Transport struct {
	// Dial opens a connection to addr, the request URL's host:port.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Fallback takes every request Transport does not: see Handles.
	Fallback http.RoundTripper
	// MaxIdlePerHost and MaxIdle bound the idle connections kept, to one
	// host and in all; zero keeps none.
	MaxIdlePerHost, MaxIdle int
	// IdleTimeout closes a connection idle for longer; zero never does.
	IdleTimeout time.Duration
	// MaxResponseHeaderBytes bounds a reply's status line and headers;
	// zero is 1 MiB.
	MaxResponseHeaderBytes int64

	mu    sync.Mutex       // guards the fields below
	idle  map[string]conns // by host, the newest last
	nIdle int
	sweep *time.Timer // closes expired idle connections; nil when none are idle
}

// conns is a stack of idle connections to one host.
type conns []*conn

// conn is a connection to an app and its buffers.
type conn struct {
	nc    net.Conn
	lr    io.LimitedReader // under br: bounds a reply's header
	br    *bufio.Reader
	bw    *bufio.Writer
	host  string
	since time.Time // idle since
}

// Handles reports whether RoundTrip takes req itself rather than passing
// it to Fallback: a plain http request without a body, by GET, HEAD or
// OPTIONS (methods a stale connection may be retried with), that asks
// for no upgrade.
func Handles(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, "":
	default:
		return false
	}
	return req.URL.Scheme == "http" && (req.Body == nil || req.Body == http.NoBody) &&
		req.Header.Get("Upgrade") == "" && len(req.TransferEncoding) == 0 && len(req.Trailer) == 0
}

// RoundTrip sends req and returns its reply, whose body hands the
// connection back for reuse once it is read to its end; closing it
// sooner closes the connection. A reused connection that the app closed
// while it was idle fails before any reply: the request is then sent
// again on a new one.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !Handles(req) {
		return t.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	host := req.URL.Host
	for fresh := false; ; fresh = true {
		c := (*conn)(nil)
		if !fresh {
			c = t.getIdle(host)
		}
		reused := c != nil
		if !reused {
			nc, err := t.Dial(ctx, host)
			if err != nil {
				return nil, err
			}
			c = t.newConn(nc, host)
		}
		resp, err := t.exchange(ctx, c, req, reused)
		if err == nil {
			return resp, nil
		}
		c.nc.Close()
		if errors.Is(err, errStale) && ctx.Err() == nil {
			continue // the app closed it while idle: once more, on a new one
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
}

// errStale is a reused connection that failed before any byte of the reply.
var errStale = errors.New("h1: idle connection closed by the app")

// exchange writes req on c and reads the reply's header. On an error, c
// is the caller's to close.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request, reused bool) (*http.Response, error) {
	// The request's context ends a write or read blocked on the app.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	resp, err := t.send(c, req, reused)
	if err != nil {
		stop()
		return nil, err
	}
	// After a HEAD the connection is not kept: an app that wrongly sends
	// a body anyway would have it read as the next request's reply.
	// (http.Transport finds such bytes with the read it keeps going on
	// every idle connection, which this transport saves.)
	keep := !resp.Close && !req.Close && req.Method != http.MethodHead
	b := &body{rc: resp.Body, c: c, t: t, stop: stop, keep: keep}
	if resp.Body == http.NoBody {
		b.done(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// send writes req on c and reads the reply's header, passing 1xx replies
// but 101 to the request's trace (ReverseProxy forwards them).
func (t *Transport) send(c *conn, req *http.Request, reused bool) (*http.Response, error) {
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		if reused {
			return nil, fmt.Errorf("%w: %w", errStale, err)
		}
		return nil, err
	}
	maxHeader := t.MaxResponseHeaderBytes
	if maxHeader == 0 {
		maxHeader = 1 << 20
	}
	c.lr.N = maxHeader
	defer func() { c.lr.N = math.MaxInt64 }()
	if _, err := c.br.Peek(1); err != nil {
		if reused && c.lr.N == maxHeader { // not a byte came: the app had closed it
			return nil, fmt.Errorf("%w: %w", errStale, err)
		}
		return nil, err
	}
	trace := httptrace.ContextClientTrace(req.Context())
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			if c.lr.N <= 0 {
				return nil, fmt.Errorf("the reply's header is over %d bytes", maxHeader)
			}
			return nil, err
		}
		switch {
		case resp.StatusCode >= 200:
			return resp, nil
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("101 Switching Protocols to a request for no upgrade")
		case n == max1xxResponses:
			return nil, errors.New("too many 1xx replies")
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
		}
		c.lr.N = maxHeader
	}
}

// body is a reply's body: at its end the connection goes back to the
// idle pool, if the reply allows it.
type body struct {
	rc   io.ReadCloser
	c    *conn
	t    *Transport
	stop func() bool // ends the request context's hold on c
	keep bool        // the connection may be reused after this reply

	mu       sync.Mutex // guards finished; Read and Close may race
	finished bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.done(true)
	}
	return n, err
}

// Close closes the connection unless the body was read to its end.
func (b *body) Close() error {
	b.done(false)
	return nil
}

// done releases the connection, to the idle pool if the body was read
// to its end (atEOF) and nothing else forbids it, or closed.
func (b *body) done(atEOF bool) {
	b.mu.Lock()
	if b.finished {
		b.mu.Unlock()
		return
	}
	b.finished = true
	b.mu.Unlock()
	// stop is false if the context ended: its deadline has spoilt c.
	if b.stop() && atEOF && b.keep && b.c.br.Buffered() == 0 {
		b.t.putIdle(b.c)
		return
	}
	b.c.nc.Close()
}

func (t *Transport) newConn(nc net.Conn, host string) *conn {
	c := &conn{nc: nc, host: host}
	c.lr = io.LimitedReader{R: nc, N: math.MaxInt64}
	c.br = bufio.NewReaderSize(&c.lr, bufferSize)
	c.bw = bufio.NewWriterSize(nc, bufferSize)
	return c
}
