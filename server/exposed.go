package server

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// exposedPorts are the ports reachable by host name: a request whose host
// starts with "PORT-" (8000-mysandbox.example.com) goes to the app on
// PORT. The zero value has none.
type exposedPorts struct {
	// mu guards ports. An exposure is never changed once stored: expose
	// replaces it, so a request may keep the one it looked up.
	mu    sync.RWMutex
	ports map[int]*exposure
}

// exposure is one exposed port.
type exposure struct {
	port   int
	public bool // previews by host name need no token
	// ctx ends when the port is unexposed, and with it the requests in
	// flight by host name: their event streams and WebSockets.
	ctx    context.Context
	cancel context.CancelFunc
	// anon, a child of ctx, is set while the port is public: it ends when
	// the port turns private, and with it the requests let in without
	// the token.
	anon       context.Context
	cancelAnon context.CancelFunc
}

// expose exposes port, or changes whether it is public. A port that
// turns private ends the requests it let in without the token.
func (e *exposedPorts) expose(port int, public bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ports == nil {
		e.ports = map[int]*exposure{}
	}
	next := &exposure{port: port, public: public}
	old := e.ports[port]
	if old != nil {
		next.ctx, next.cancel = old.ctx, old.cancel
	} else {
		// Not a request's context: the exposure outlives the request.
		next.ctx, next.cancel = context.WithCancel(context.Background())
	}
	switch {
	case public && old != nil && old.public:
		next.anon, next.cancelAnon = old.anon, old.cancelAnon
	case public:
		next.anon, next.cancelAnon = context.WithCancel(next.ctx)
	case old != nil && old.public:
		old.cancelAnon()
	}
	e.ports[port] = next
}

// unexpose removes port and ends its requests in flight. It reports
// whether port was exposed.
func (e *exposedPorts) unexpose(port int) bool {
	e.mu.Lock()
	old := e.ports[port]
	delete(e.ports, port)
	e.mu.Unlock()
	if old == nil {
		return false
	}
	old.cancel()
	return true
}

func (e *exposedPorts) lookup(port int) *exposure {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.ports[port]
}

func (e *exposedPorts) list() []*exposure {
	e.mu.RLock()
	l := make([]*exposure, 0, len(e.ports))
	for _, x := range e.ports {
		l = append(l, x)
	}
	e.mu.RUnlock()
	slices.SortFunc(l, func(a, b *exposure) int { return cmp.Compare(a.port, b.port) })
	return l
}

// hostPort returns the port that host ("8000-mysandbox.example.com:443")
// names with its "PORT-" start, if it has one.
func hostPort(host string) (int, bool) {
	if host == "" || host[0] < '1' || host[0] > '9' { // most hosts stop here
		return 0, false
	}
	digits, _, ok := strings.Cut(host, "-")
	if !ok || len(digits) > len("65535") {
		return 0, false
	}
	port, err := portFromText(digits)
	return port, err == nil
}

// routeHost sends a request whose host names an exposed port to the app on
// that port, with its path as sent; the others go to next, the API. The
// host is Host, or the last entry of X-Forwarded-Host first if
// TrustForwardedHost is set. A port that is not public needs the token as
// the API does.
func (s *Server) routeHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := s.exposedFor(r)
		if x == nil {
			next.ServeHTTP(w, r)
			return
		}
		stateOf(r).route = routeHostPreview
		// unexpose_port ends the request; and, for a request let in
		// without the token, the port turning private.
		until := x.ctx
		if x.public {
			// Whoever has the URL may use it; the edge decided who gets
			// it. Such a connection may idle (an event stream) but is
			// still the first to go at the connection cap.
			if c := connOf(r); c != nil {
				c.AllowIdle()
			}
			until = x.anon
		} else if !s.authorize(w, r) {
			return
		}
		path, _, _ := strings.Cut(r.RequestURI, "?")
		if !strings.HasPrefix(path, "/") { // an absolute-form target
			path = r.URL.EscapedPath()
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(until, cancel)
		defer stop()
		s.servePreview(w, r.WithContext(ctx), previewTarget{port: x.port, path: path})
	})
}

// exposedFor returns the exposure r's host names, or nil.
func (s *Server) exposedFor(r *http.Request) *exposure {
	port, ok := hostPort(s.requestOrigin(r).host)
	if !ok {
		return nil
	}
	return s.exposed.lookup(port)
}

// lastForwarded returns the last entry of the comma-separated list that
// h's name headers make, trimmed: the one the edge nearest the agent set.
// An edge that appends to what the client sent leaves the client's
// entries first, so only the last can be trusted; if it is empty, none
// is, and lastForwarded returns "".
func lastForwarded(h http.Header, name string) string {
	values := h.Values(name)
	if len(values) == 0 {
		return ""
	}
	v := values[len(values)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// exposeReply is the reply of /expose_port, and an item of
// /list_exposed_ports.
type exposeReply struct {
	Port   int  `json:"port"`
	Public bool `json:"public"`
}

// handlePortExpose serves POST /expose_port: requests whose host starts
// with "PORT-" go to the app on port from now on. Exposing an exposed port
// again sets public anew.
func (s *Server) handlePortExpose(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Port   json.RawMessage `json:"port"` // parsed by parsePort, which needs the text as sent
		Public bool            `json:"public"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	port, err := parsePort(req.Port)
	if err != nil {
		return err
	}
	if s.ownPort(port) {
		return errorf(http.StatusBadRequest, "port %d is the agent's own: it cannot be exposed", port)
	}
	s.exposed.expose(port, req.Public)
	encode(w, http.StatusOK, map[string]any{"success": true, "port": port, "public": req.Public})
	return nil
}

// handlePortUnexpose serves POST /unexpose_port: the port is no longer
// reachable by host name, and the requests in flight to it that way end.
// A port that was not exposed is no error: removed says whether it was.
func (s *Server) handlePortUnexpose(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Port json.RawMessage `json:"port"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	port, err := parsePort(req.Port)
	if err != nil {
		return err
	}
	removed := s.exposed.unexpose(port)
	encode(w, http.StatusOK, map[string]any{"success": true, "port": port, "removed": removed})
	return nil
}

// handlePortListExposed serves GET /list_exposed_ports, by port.
func (s *Server) handlePortListExposed(w http.ResponseWriter, r *http.Request) error {
	ports := []exposeReply{}
	for _, x := range s.exposed.list() {
		ports = append(ports, exposeReply{Port: x.port, Public: x.public})
	}
	encode(w, http.StatusOK, map[string]any{"ports": ports})
	return nil
}

// originKey is the context key of the origin an MCP request came by, for
// preview_url's host form.
type originKey struct{}

// origin is the scheme and host a request came by: Host (or, with
// TrustForwardedHost, the last X-Forwarded-Host and -Proto), as
// exposedFor reads them.
type origin struct{ scheme, host string }

// requestOrigin returns the origin r came by.
func (s *Server) requestOrigin(r *http.Request) origin {
	o := origin{scheme: "http", host: r.Host}
	if r.TLS != nil {
		o.scheme = "https"
	}
	if s.cfg.TrustForwardedHost {
		if fwd := lastForwarded(r.Header, "X-Forwarded-Host"); fwd != "" {
			o.host = fwd
		}
		if proto := lastForwarded(r.Header, "X-Forwarded-Proto"); proto == "http" || proto == "https" {
			o.scheme = proto
		}
	}
	return o
}

// hostFormURL returns the URL by which port is previewed by host name,
// built from the origin in ctx: "https://3000-mysandbox.example.com/".
// It is "" when there is no origin, or its host is an IP address or a
// name with no dot (localhost), which no "PORT-" name can reach.
func hostFormURL(ctx context.Context, port int) string {
	o, ok := ctx.Value(originKey{}).(origin)
	if !ok {
		return ""
	}
	host := o.host
	if _, ok := hostPort(host); ok { // came by another port's host name
		_, host, _ = strings.Cut(host, "-")
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if name == "" || net.ParseIP(strings.Trim(name, "[]")) != nil || !strings.Contains(name, ".") {
		return ""
	}
	return o.scheme + "://" + strconv.Itoa(port) + "-" + host + "/"
}
