package server

import (
	"context"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/internal/h1"
	"github.com/sandbox-executor/sandbox-executor/internal/relay"
)

// The preview proxy forwards HTTP requests, WebSocket upgrades included,
// to an app listening on a port of the sandbox, reached by path
// (/proxy/PORT/...) or by host name (PORT-anything.example.com, for an
// exposed port: see routeHost). The app sees:
//   - the method, the query, the body, and the path after /proxy/PORT as
//     the client sent it, percent-encoding and all: never cleaned, since
//     "//" and ".." may mean something to the app;
//   - Host: 127.0.0.1:PORT, the address it listens on, for plain requests
//     and upgrades alike: dev servers that check Host against a list
//     (Vite's allowedHosts, webpack's allowedHosts) accept it as they
//     would a local browser's. The client's host is in X-Forwarded-Host;
//   - X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host, and
//     X-Forwarded-Prefix: /proxy/PORT (with the base path, as sent) for
//     a request by path, where the app must prefix its absolute links;
//   - never the agent's token: every Authorization header that carries it
//     (Bearer, or Basic with it as the password), and the bearer.*
//     WebSocket subprotocol, are removed.
// The reply is the app's, status, headers and body untouched, streamed as
// it is written: an event stream, or any body of unknown length, reaches
// the client write by write.
// Nothing listening on the port is a JSON 502.

const (
	previewIdlePerPort = 64 // idle keep-alive connections kept to one app
	previewIdleTotal   = 256
	previewIdleTimeout = 90 * time.Second
	previewBufferSize  = 32 << 10
	previewMaxHeader   = 1 << 20 // a reply's status line and headers
)

// previewKey is the context key of a request's previewTarget, from the
// handler to Rewrite.
type previewKey struct{}

// previewTarget is where a preview request goes.
type previewTarget struct {
	port   int
	path   string // as sent (escaped), starting with "/"
	prefix string // X-Forwarded-Prefix; empty for a request by host name
}

// previewProxy is the reverse proxy of the preview endpoints and the
// transport it keeps to the sandbox's apps.
type previewProxy struct {
	rp        *httputil.ReverseProxy
	transport *h1.Transport
}

func newPreviewProxy(s *Server) *previewProxy {
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p) // set by Rewrite: always a valid port
		return relay.DialLoopback(ctx, port)
	}
	fallback := &http.Transport{
		Proxy:               nil, // never the sandbox's HTTP_PROXY: the app is local
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
		MaxIdleConns:        previewIdleTotal,
		MaxIdleConnsPerHost: previewIdlePerPort,
		IdleConnTimeout:     previewIdleTimeout,
		// As h1.Transport's default: a reply's header is not a place
		// for 10 MB, http.Transport's.
		MaxResponseHeaderBytes: previewMaxHeader,
		// The client's Accept-Encoding goes to the app as sent, and the
		// app's encoding back untouched: the transport neither asks for
		// gzip nor decodes it.
		DisableCompression: true,
	}
	// Bodiless GETs, nearly all of a preview's requests, take a
	// transport that does each round trip in the handler's goroutine
	// (see package h1); bodies and upgrades take http.Transport.
	t := &h1.Transport{
		Dial:                   dial,
		Fallback:               fallback,
		MaxIdlePerHost:         previewIdlePerPort,
		MaxIdle:                previewIdleTotal,
		IdleTimeout:            previewIdleTimeout,
		MaxResponseHeaderBytes: previewMaxHeader,
	}
	pool := &sync.Pool{New: func() any { return new([previewBufferSize]byte) }}
	rp := &httputil.ReverseProxy{
		Rewrite:   s.rewritePreview,
		Transport: t,
		// Zero, not -1: ReverseProxy already flushes every write at once
		// for an event stream and for a body of unknown length (chunked),
		// and a reply with a Content-Length is copied as it arrives. -1
		// would also start a timer per reply that flushes its headers
		// alone: one more goroutine and write each, some 10% of the
		// proxy's CPU for small replies (BenchmarkPreview).
		FlushInterval: 0,
		BufferPool:    bufferPool{pool},
		ErrorHandler:  s.previewError,
		ErrorLog:      stdlog.New(debugWriter{s.log}, "preview: ", 0),
	}
	return &previewProxy{rp: rp, transport: t}
}

func (p *previewProxy) closeIdle() { p.transport.CloseIdleConnections() }

// bufferPool lends ReverseProxy its copy buffers.
type bufferPool struct{ p *sync.Pool }

func (b bufferPool) Get() []byte  { return b.p.Get().(*[previewBufferSize]byte)[:] }
func (b bufferPool) Put(p []byte) { b.p.Put((*[previewBufferSize]byte)(p[:previewBufferSize])) }

// debugWriter logs ReverseProxy's own messages (a client that left in the
// middle of a reply) at debug level.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// servePreview forwards r to tgt.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, tgt previewTarget) {
	s.preview.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), previewKey{}, tgt)))
}

// rewritePreview is the ReverseProxy's Rewrite: see the comment at the
// top of this file.
func (s *Server) rewritePreview(pr *httputil.ProxyRequest) {
	tgt := pr.In.Context().Value(previewKey{}).(previewTarget)
	u := pr.Out.URL
	u.Scheme, u.Host = "http", "127.0.0.1:"+strconv.Itoa(tgt.port)
	u.Path, u.RawPath = tgt.path, tgt.path
	if p, err := url.PathUnescape(tgt.path); err == nil {
		u.Path = p
	}
	u.Opaque, u.User, u.ForceQuery = "", nil, false
	pr.Out.Host = "" // the URL's: 127.0.0.1:PORT
	pr.SetXForwarded()
	if s.cfg.TrustForwardedHost {
		// The edge's entries only: see lastForwarded.
		for _, h := range []string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
			if v := lastForwarded(pr.In.Header, h); v != "" {
				pr.Out.Header.Set(h, v)
			}
		}
	}
	pr.Out.Header.Del("X-Forwarded-Prefix")
	if tgt.prefix != "" {
		pr.Out.Header.Set("X-Forwarded-Prefix", tgt.prefix)
	}
	s.stripTokenAuthorization(pr.Out.Header)
	stripTokenProtocol(pr.Out.Header)
}

// stripTokenAuthorization removes from h every Authorization value that
// carries the agent's token, as a bearer token or as the password of
// Basic credentials, and keeps the others (the app's own credentials). A
// public preview does not check the header, so a client may send it more
// than once.
func (s *Server) stripTokenAuthorization(h http.Header) {
	values := h.Values("Authorization")
	if len(values) == 0 {
		return
	}
	kept := make([]string, 0, len(values))
	for _, v := range values {
		if !s.carriesToken(v) {
			kept = append(kept, v)
		}
	}
	if len(kept) == len(values) {
		return
	}
	h.Del("Authorization")
	for _, v := range kept {
		h.Add("Authorization", v)
	}
}

// carriesToken reports whether the credentials of an Authorization or
// Proxy-Authorization value are the agent's token.
func (s *Server) carriesToken(v string) bool {
	if token, ok := bearer(v); ok {
		return s.auth.isSecret(token)
	}
	if token, ok := basicPassword(v); ok {
		return s.auth.isSecret(token)
	}
	return false
}

// stripTokenProtocol removes the bearer.* entries, which carry the
// agent's token, from the WebSocket subprotocols h offers.
func stripTokenProtocol(h http.Header) {
	values := h.Values("Sec-WebSocket-Protocol")
	if len(values) == 0 {
		return
	}
	var kept []string
	for _, v := range values {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, wsTokenPrefix) {
				kept = append(kept, p)
			}
		}
	}
	h.Del("Sec-WebSocket-Protocol")
	if len(kept) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(kept, ", "))
	}
}

// previewError is the ReverseProxy's ErrorHandler: the app could not be
// reached, or failed before its reply's status.
func (s *Server) previewError(w http.ResponseWriter, r *http.Request, err error) {
	tgt, _ := r.Context().Value(previewKey{}).(previewTarget)
	port := strconv.Itoa(tgt.port)
	he := &httpError{code: http.StatusBadGateway, cause: err}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		he.msg = "nothing is listening on port " + port + " in the sandbox"
	case errors.Is(err, context.DeadlineExceeded):
		he.code, he.msg = http.StatusGatewayTimeout, "the app on port "+port+" did not answer in time"
	default:
		he.msg = "the app on port " + port + " failed to answer"
	}
	s.log.Debug().Err(err).Int("port", tgt.port).Msg("preview failed")
	s.writeError(w, r, he)
}

// handlePreviewPath serves /proxy/{port}/{rest}, any method: the request
// goes to the app on port with the path rest, as sent.
func (s *Server) handlePreviewPath(w http.ResponseWriter, r *http.Request) error {
	port, err := s.previewPort(r.PathValue("port"))
	if err != nil {
		return err
	}
	path, prefix := s.sentPath(r, port)
	s.servePreview(w, r, previewTarget{port: port, path: path, prefix: prefix})
	return nil
}

// handlePreviewRoot serves /proxy/{port} (GET and HEAD) with a redirect to
// /proxy/{port}/, where the app's relative links resolve.
func (s *Server) handlePreviewRoot(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.previewPort(r.PathValue("port")); err != nil {
		return err
	}
	loc, _, _ := strings.Cut(r.RequestURI, "?")
	if !strings.HasPrefix(loc, "/") {
		loc = r.URL.EscapedPath()
	}
	loc = strings.TrimRight(loc, "/") + "/"
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	encode(w, http.StatusPermanentRedirect, map[string]any{"location": loc})
	return nil
}

// previewPort reads the port of a preview path: the agent's own ports are
// refused, as the proxy and tunnels refuse them.
func (s *Server) previewPort(text string) (int, error) {
	port, err := portFromText(text)
	if err != nil {
		return 0, err
	}
	if s.ownPort(port) {
		return 0, errorf(http.StatusForbidden, "port %d is the agent's own: previews of it are refused", port)
	}
	return port, nil
}

// ownPort reports whether port is one of the agent's own.
func (s *Server) ownPort(port int) bool {
	return port == s.cfg.APIPort || port == s.cfg.ProxyPort || (s.tunnels != nil && s.tunnels.IsReserved(port))
}

// sentPath returns the path after /proxy/PORT as the client sent it, and
// the prefix before it (the base path included, if it was there). Only if
// the client wrote the prefix in an unclean form (//proxy/8000/x) is the
// cleaned path used instead.
func (s *Server) sentPath(r *http.Request, port int) (path, prefix string) {
	marker := "/proxy/" + strconv.Itoa(port)
	raw, _, _ := strings.Cut(r.RequestURI, "?")
	for _, pre := range []string{s.cfg.BasePath + marker, marker} {
		if rest, ok := strings.CutPrefix(raw, pre); ok && strings.HasPrefix(rest, "/") {
			return rest, pre
		}
	}
	rest := strings.TrimPrefix(r.URL.EscapedPath(), marker)
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return rest, marker
}
