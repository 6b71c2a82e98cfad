package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/internal/wsclient"
)

// ErrConnectUnsupported is matched by errors.Is when a CONNECT did not
// reach the agent: what answered (an edge proxy or load balancer in front
// of it) refused the method, or answered something that is not the
// agent's. DialOptions.WebSocket goes through such edges more often.
var ErrConnectUnsupported = errors.New("CONNECT did not reach the agent")

// DialOptions configures DialTunnel. The zero value tunnels with CONNECT.
type DialOptions struct {
	// WebSocket tunnels over GET /tunnel_ws instead of CONNECT, for edges
	// that pass WebSockets but not CONNECT. A WebSocket has no
	// half-close: CloseWrite is not offered, and the tunnel ends when
	// either side closes.
	WebSocket bool
}

// DialTunnel opens a tunnel to port on the sandbox's loopback interface,
// through the agent, and returns its end: what is written to it reaches
// the port, and what the port sends is read from it. The connection is
// the caller's to close. With CONNECT (the default) it is the TCP (or TLS)
// connection to the agent itself, which has CloseWrite and, over plain
// TCP, lets io.Copy splice.
//
// A refusal by the agent is an *Error: 401 or 407 for the token, 403 for
// a port of the agent's own, 502 when nothing listens on the port, 503 at
// the agent's cap on tunnels. A CONNECT that an edge in front of the agent
// did not pass wraps ErrConnectUnsupported. ctx bounds the opening only.
func (c *Client) DialTunnel(ctx context.Context, port int, opts DialOptions) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("tunnel: port %d is not between 1 and 65535", port)
	}
	if opts.WebSocket {
		return c.dialWebSocket(ctx, port)
	}
	return c.dialConnect(ctx, port)
}

// dialConnect opens a tunnel with CONNECT {base path}/tunnel/PORT: the
// path form, which an edge routing by path prefix passes like any request,
// with the token in Authorization, which edges pass on (they drop
// Proxy-Authorization, a hop-by-hop header).
func (c *Client) dialConnect(ctx context.Context, port int) (net.Conn, error) {
	u, conn, err := c.dialAgent(ctx)
	if err != nil {
		return nil, err
	}
	// The handshake is bounded by ctx: a deadline, and a close if it ends.
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	br, err := c.connectHandshake(conn, u, port)
	if !stop() || err != nil {
		conn.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() == 0 {
		return conn, nil
	}
	// The port spoke first (an SSH banner) and its bytes came with the
	// reply: they are read first.
	return &bufferedConn{Conn: conn, r: br}, nil
}

// dialAgent connects to the agent's host, with TLS for https, for a
// tunnel's handshake. It returns the parsed base URL with the connection;
// its errors are ctx's, or a *ConnError.
func (c *Client) dialAgent(ctx context.Context) (*url.URL, net.Conn, error) {
	u, _ := url.Parse(c.base) // checked by New
	conn, err := c.dialHost(ctx, u)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, nil, ctxErr
		}
		return nil, nil, &ConnError{URL: c.base, Err: err}
	}
	return u, conn, nil
}

// dialHost connects to u's host, with TLS for https.
func (c *Client) dialHost(ctx context.Context, u *url.URL) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil || u.Scheme != "https" {
		return conn, err
	}
	cfg := &tls.Config{}
	if t, ok := c.hc.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	cfg.NextProtos = []string{"http/1.1"} // CONNECT as written here is HTTP/1.1
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// connectHandshake sends the CONNECT and reads the reply. It returns the
// reader that holds whatever came after the reply.
func (c *Client) connectHandshake(conn net.Conn, u *url.URL, port int) (*bufio.Reader, error) {
	path := strings.TrimRight(u.EscapedPath(), "/") + "/tunnel/" + strconv.Itoa(port)
	req := "CONNECT " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\n"
	if c.token != "" {
		req += "Authorization: Bearer " + c.token + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return nil, &ConnError{URL: c.base, Err: err}
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, fmt.Errorf("%w: no HTTP reply to CONNECT from %s (%v)", ErrConnectUnsupported, c.base, err)
	}
	if resp.StatusCode == http.StatusOK {
		// The agent's 200 has no body. One that declares a body is a
		// page: an edge answered in the agent's stead.
		if resp.ContentLength > 0 || len(resp.TransferEncoding) > 0 || resp.Header.Get("Content-Type") != "" {
			return nil, fmt.Errorf("%w: %s answered CONNECT with a page, not a tunnel", ErrConnectUnsupported, c.base)
		}
		return br, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if e := agentError(resp.StatusCode, body); e != nil {
		return nil, e
	}
	return nil, fmt.Errorf("%w: %s answered %s", ErrConnectUnsupported, c.base, resp.Status)
}

// agentError returns the *Error of a refusal the agent wrote (a JSON
// {"error": ...} with one of its tunnel statuses), or nil for a reply that
// is not the agent's.
func agentError(status int, body []byte) *Error {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		return nil
	}
	var e struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return nil
	}
	return &Error{StatusCode: status, Message: *e.Error}
}

// dialWebSocket opens a tunnel over GET {base path}/tunnel_ws?port=PORT,
// on a connection dialled as for CONNECT. The WebSocket is this module's
// own client (internal/wsclient), which writes each frame in one write(2)
// rather than 4 KiB at a time.
func (c *Client) dialWebSocket(ctx context.Context, port int) (net.Conn, error) {
	u, conn, err := c.dialAgent(ctx)
	if err != nil {
		return nil, err
	}
	req := wsclient.Request{
		Host:        u.Host,
		Path:        strings.TrimRight(u.EscapedPath(), "/") + "/tunnel_ws?port=" + strconv.Itoa(port),
		Subprotocol: "sandbox-executor",
	}
	if c.token != "" {
		req.Header = http.Header{"Authorization": {"Bearer " + c.token}}
	}
	ws, err := wsclient.Handshake(ctx, conn, req)
	if err == nil {
		return ws, nil
	}
	conn.Close()
	var ue *wsclient.UpgradeError
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &ue):
		if e := agentError(ue.StatusCode, ue.Body); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("%s did not upgrade %s to a WebSocket: %s", c.base, "/tunnel_ws", ue.Status)
	}
	return nil, &ConnError{URL: c.base, Err: err}
}

// bufferedConn is a tunnel whose first bytes were read with the CONNECT
// reply: r holds them, and Read drains it before reading the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p) // from the buffer only: it holds enough
	}
	return c.Conn.Read(p)
}

// WriteTo writes what is buffered, then copies the connection itself, so
// that io.Copy from a tunnel to a socket still splices.
func (c *bufferedConn) WriteTo(w io.Writer) (int64, error) {
	buffered, _ := c.r.Peek(c.r.Buffered())
	n, err := w.Write(buffered)
	_, _ = c.r.Discard(n)
	if err != nil {
		return int64(n), err
	}
	m, err := io.Copy(w, c.Conn)
	return int64(n) + m, err
}

// ReadFrom copies r to the connection with its own ReadFrom (splice for a
// socket).
func (c *bufferedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite half-closes the connection.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// Tunnel is an open tunnel, as ListTunnels reports it.
type Tunnel struct {
	ID      uint64    // unique for the agent's life
	Kind    string    // "connect" or "ws"
	Port    int       // the sandbox port it reaches
	Target  string    // the address the agent dialled, as 127.0.0.1:22
	Client  string    // the client's address as the agent sees it
	Started time.Time // when it was opened
	// BytesToPort and BytesFromPort are the bytes moved so far each way.
	BytesToPort, BytesFromPort int64
}

// ListTunnels returns the agent's open tunnels, oldest first.
func (c *Client) ListTunnels(ctx context.Context) ([]Tunnel, error) {
	var r struct {
		Tunnels []struct {
			ID            uint64    `json:"id"`
			Kind          string    `json:"kind"`
			Port          int       `json:"port"`
			Target        string    `json:"target"`
			Client        string    `json:"client"`
			StartedAt     time.Time `json:"started_at"`
			BytesToPort   int64     `json:"bytes_to_port"`
			BytesFromPort int64     `json:"bytes_from_port"`
		} `json:"tunnels"`
	}
	if err := c.call(ctx, http.MethodGet, "/list_tunnels", nil, &r); err != nil {
		return nil, err
	}
	ts := make([]Tunnel, len(r.Tunnels))
	for i, t := range r.Tunnels {
		ts[i] = Tunnel{ID: t.ID, Kind: t.Kind, Port: t.Port, Target: t.Target, Client: t.Client, Started: t.StartedAt,
			BytesToPort: t.BytesToPort, BytesFromPort: t.BytesFromPort}
	}
	return ts, nil
}
