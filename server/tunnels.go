package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
	"github.com/sandbox-executor/sandbox-executor/internal/relay"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
)

// connectEstablished is the reply that opens a CONNECT tunnel, written by
// hand on the hijacked connection, with the request's X-Request-Id.
const connectEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n"

// serveConnect serves CONNECT requests itself; the others go to next. A
// CONNECT never reaches the router: the authority form (CONNECT
// 127.0.0.1:22) has no path, and the path form (CONNECT /tunnel/22) is
// matched here, base path included, so that both answer alike.
func (s *Server) serveConnect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			next.ServeHTTP(w, r)
			return
		}
		stateOf(r).route = routeConnect
		if err := s.handleTunnelConnect(w, r); err != nil {
			// A client may have sent bytes for the tunnel after its
			// request: they must not be read as the next request.
			closeAfterReply(w)
			s.writeError(w, r, err)
		}
	})
}

// handleTunnelConnect serves CONNECT 127.0.0.1:PORT (also localhost:PORT and
// [::1]:PORT) and CONNECT /tunnel/PORT: once the token, the target and the
// dial are good, it answers 200 Connection Established on the hijacked
// connection and joins it to the port until either side ends.
func (s *Server) handleTunnelConnect(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorizeConnect(w, r); err != nil {
		return err
	}
	to, err := s.connectTarget(r)
	if err != nil {
		return err
	}
	tun, err := s.tunnels.Open(r.Context(), tunnels.Connect, to, r.RemoteAddr)
	if err != nil {
		return tunnelError(err, to.Port)
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		tun.Close()
		return err
	}
	defer conn.Close() // through the *Conn, which gives its slot back
	hijacked(r, http.StatusOK)
	raw := conn
	if c, ok := conn.(*connlimit.Conn); ok {
		raw = c.NetConn() // the *net.TCPConn, so that the copies splice
	}
	// What the client sent after its request (an SSH banner, a TLS hello)
	// may already sit in the server's buffer; it goes first.
	prefix, _ := brw.Reader.Peek(brw.Reader.Buffered())
	reply := connectEstablished
	if id := requestID(r); id != "" { // visible ASCII: see validRequestID
		reply = strings.Replace(reply, "\r\n\r\n", "\r\n"+requestIDHeader+": "+id+"\r\n\r\n", 1)
	}
	if _, err := raw.Write([]byte(reply)); err != nil {
		tun.Close()
		return nil // the client left; nothing more can be said
	}
	stop := context.AfterFunc(r.Context(), tun.Close) // shutdown ends the tunnel
	defer stop()
	_ = tun.Join(raw, prefix)
	return nil
}

// authorizeConnect checks the token of Proxy-Authorization, or of
// Authorization without it, and marks the connection as authenticated.
// The token is a bearer token, or the password of Basic credentials with
// any user name: what curl -U :TOKEN and http_proxy=http://x:TOKEN@host
// send, since proxy clients know no other scheme. A missing or refused
// token is 407 with Proxy-Authenticate, which is what proxy clients
// (curl -p, SDKs) know how to answer.
func (s *Server) authorizeConnect(w http.ResponseWriter, r *http.Request) error {
	header := "Proxy-Authorization"
	if len(r.Header.Values(header)) == 0 {
		header = "Authorization"
	}
	if len(r.Header.Values(header)) > 1 {
		markAnon(r)
		return errorf(http.StatusBadRequest, "more than one %s header", header)
	}
	ok := false
	token, found := bearer(r.Header.Get(header))
	if !found {
		token, found = basicPassword(r.Header.Get(header))
	}
	if found {
		var claimed bool
		var err error
		ok, claimed, err = s.auth.checkToken(token)
		if claimed {
			s.log.Info().Str("request_id", requestID(r)).Str("remote", r.RemoteAddr).Msg("pool sandbox claimed")
		}
		if err != nil {
			return err
		}
	}
	if !ok {
		markAnon(r)
		w.Header().Add("Proxy-Authenticate", `Bearer realm="sandbox-executor"`)
		w.Header().Add("Proxy-Authenticate", `Basic realm="sandbox-executor"`)
		return errorf(http.StatusProxyAuthRequired,
			"proxy authentication required: a valid 'Proxy-Authorization: Bearer <secret>' header (or Basic with the secret as the password, or 'Authorization: Bearer <secret>') is required")
	}
	if c := connOf(r); c != nil {
		c.Authenticate()
	}
	return nil
}

// connectTarget reads where a CONNECT goes: HOST:PORT, where HOST is a
// loopback address or localhost (any other host is 403), or /tunnel/PORT
// under the base path, which reaches 127.0.0.1 and then [::1].
func (s *Server) connectTarget(r *http.Request) (tunnels.Target, error) {
	const want = "CONNECT wants 127.0.0.1:PORT, localhost:PORT, [::1]:PORT or /tunnel/PORT"
	if r.URL.Path == "" { // the authority form
		host, portText, err := net.SplitHostPort(r.URL.Host)
		if err != nil {
			return tunnels.Target{}, errorf(http.StatusBadRequest, "%s, not %q", want, r.URL.Host)
		}
		port, err := portFromText(portText)
		if err != nil {
			return tunnels.Target{}, err
		}
		if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
			return tunnels.Target{Port: port}, nil
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Unmap().IsLoopback() {
			return tunnels.Target{}, errorf(http.StatusForbidden,
				"tunnels reach the sandbox's loopback interface only (127.0.0.1, localhost or [::1]), not %q", host)
		}
		return tunnels.Target{IP: ip, Port: port}, nil
	}
	p := cleanPath(r.URL.Path)
	if rest, ok := strings.CutPrefix(p, s.cfg.BasePath); s.cfg.BasePath != "" && ok && strings.HasPrefix(rest, "/") {
		p = rest
	}
	portText, ok := strings.CutPrefix(p, "/tunnel/")
	if !ok {
		return tunnels.Target{}, errorf(http.StatusBadRequest, "%s, not %q", want, r.URL.Path)
	}
	port, err := portFromText(portText)
	return tunnels.Target{Port: port}, err
}

// tunnelError turns an error of tunnels.Registry.Open into the reply.
func tunnelError(err error, port int) error {
	he := &httpError{cause: err}
	switch {
	case errors.Is(err, tunnels.ErrInvalidPort):
		he.code, he.msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, tunnels.ErrNotLoopback):
		he.code, he.msg = http.StatusForbidden, err.Error()
	case errors.Is(err, tunnels.ErrReservedPort):
		he.code, he.msg = http.StatusForbidden, "port "+strconv.Itoa(port)+" is the agent's own: tunnels to it are refused"
	case errors.Is(err, tunnels.ErrTooMany):
		he.code, he.msg = http.StatusServiceUnavailable, err.Error()+": try again later"
	case errors.Is(err, tunnels.ErrClosed):
		he.code, he.msg = http.StatusServiceUnavailable, "the agent is shutting down"
	case errors.Is(err, tunnels.ErrRefused):
		he.code, he.msg = http.StatusBadGateway, "nothing is listening on port "+strconv.Itoa(port)+" in the sandbox"
	case errors.Is(err, context.DeadlineExceeded):
		he.code, he.msg = http.StatusGatewayTimeout, "port "+strconv.Itoa(port)+" did not accept the connection in time"
	default:
		he.code, he.msg = http.StatusBadGateway, "cannot connect to port "+strconv.Itoa(port)+" in the sandbox"
	}
	return he
}

// handleTunnelWS serves GET /tunnel_ws?port=N: a tunnel whose bytes travel
// in binary WebSocket messages, for edges that pass WebSockets but not
// CONNECT. The status (a bad port, nothing listening, the cap) is decided
// before the upgrade. A WebSocket has no half-close: when either side
// ends, the tunnel ends.
func (s *Server) handleTunnelWS(w http.ResponseWriter, r *http.Request) error {
	port, err := portFromText(r.URL.Query().Get("port"))
	if err != nil {
		return err
	}
	if err := checkWebSocket(r); err != nil {
		return err // before the dial: a plain GET must not reach the port
	}
	tun, err := s.tunnels.Open(r.Context(), tunnels.WebSocket, tunnels.Target{Port: port}, r.RemoteAddr)
	if err != nil {
		return tunnelError(err, port)
	}
	c, err := acceptWebSocket(w, r)
	if err != nil {
		tun.Close()
		return err
	}
	// The request's context ends at shutdown, and with it the WebSocket's
	// reads and writes, and so the tunnel.
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go pingTunnel(ctx, &wg, c, s.cfg.KeepAlive)
	_ = tun.Join(relay.WebSocket(ctx, c), nil)
	cancel()
	wg.Wait()
	return nil
}

// pingTunnel pings the client of a WebSocket tunnel every interval, so
// that an edge that closes idle connections sees traffic on an idle SSH
// session. A pong that is late is not an error: the client may be busy
// writing what the tunnel gave it.
//
// pingTunnel runs in its own goroutine, one per WebSocket tunnel; it ends
// when ctx ends, which the handler does once the tunnel has ended. wg is
// the handler's.
func pingTunnel(ctx context.Context, wg *sync.WaitGroup, c *websocket.Conn, interval time.Duration) {
	defer wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, interval)
			_ = c.Ping(pctx)
			cancel()
		}
	}
}

// handleTunnelList serves GET /list_tunnels: the open tunnels, oldest
// first, with the bytes each has moved.
func (s *Server) handleTunnelList(w http.ResponseWriter, r *http.Request) error {
	type item struct {
		ID            uint64    `json:"id"`
		Kind          string    `json:"kind"`
		Port          int       `json:"port"`
		Target        string    `json:"target"`
		Client        string    `json:"client"`
		StartedAt     time.Time `json:"started_at"`
		BytesToPort   int64     `json:"bytes_to_port"`
		BytesFromPort int64     `json:"bytes_from_port"`
	}
	items := []item{}
	for _, t := range s.tunnels.List() {
		items = append(items, item{ID: t.ID, Kind: string(t.Kind), Port: t.Port, Target: t.Target, Client: t.Client,
			StartedAt: t.Started.UTC(), BytesToPort: t.ToPort, BytesFromPort: t.FromPort})
	}
	encode(w, http.StatusOK, map[string]any{"tunnels": items})
	return nil
}
