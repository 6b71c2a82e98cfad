package server

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/internal/logfield"
)

// requestIDHeader carries a request's id: taken from the request when the
// client (or a proxy in front) sent one, and always sent in the reply.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds an id taken from a request; a longer one is
// replaced, as is one with anything but visible ASCII.
const maxRequestIDLen = 128

const (
	// maxRequestLine bounds a request line (method, target and protocol):
	// a longer one is refused with 414 before authentication, so that
	// whoever has no token cannot make the agent hold, route or log a
	// megabyte of path. net/http alone would let it reach the whole
	// header's limit, 1 MB.
	maxRequestLine = 8 << 10
	// maxLoggedPath bounds the path a log line carries; a longer one is
	// cut, and the line says how long it was.
	maxLoggedPath = 256
)

// requestIDs hands out the ids of requests that came without one: a random
// prefix, different at each start, and a counter. They are unique to the
// agent's run, short, and cost an atomic add.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() requestIDs {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails on Linux
	return requestIDs{prefix: hex.EncodeToString(b) + "-"}
}

// of returns the id of r: its X-Request-Id if that is usable, else a new
// one.
func (g *requestIDs) of(r *http.Request) string {
	if id := r.Header.Get(requestIDHeader); validRequestID(id) {
		return id
	}
	return g.prefix + strconv.FormatUint(g.n.Add(1), 10)
}

// validRequestID reports whether id, from a client, is 1 to
// maxRequestIDLen bytes of visible ASCII: safe in a reply header and a log
// line as it is.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// access gives each request its id, in the reply's X-Request-Id header,
// and its state, in its context (see requestState); once the request is
// over (or its handler panicked, as http.ErrAbortHandler does to abort a
// reply), it writes the request's access-log line and records it in the
// metrics. The line is at debug level for a success and for a request
// refused before authentication (see requestState.anon), and at info for
// any other failure. A request line over maxRequestLine is refused here
// with 414, before anything else looks at the request.
func (s *Server) access(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &requestState{id: s.ids.of(r), bodyTimeout: s.cfg.BodyTimeout, bodies: s.bodies}
		st.rec.ResponseWriter = w
		r = withState(r, st)
		w.Header().Set(requestIDHeader, st.id)
		s.metrics.inFlight.Add(1)
		completed := false
		// Deferred so that a panic is logged too; it is not recovered:
		// net/http aborts the connection, and logs the stack of any panic
		// but http.ErrAbortHandler.
		defer func() { s.requestDone(st, r, time.Since(start), !completed) }()
		if n := requestLineLen(r); n > maxRequestLine {
			st.anon = true
			closeAfterReply(&st.rec) // the client may send more of the same
			s.writeError(&st.rec, r, errorf(http.StatusRequestURITooLong,
				"request line too long: %d bytes (limit %d)", n, maxRequestLine))
		} else {
			next.ServeHTTP(&st.rec, r)
		}
		completed = true
	})
}

// requestLineLen returns the length of r's request line as sent, without
// its CRLF: "GET /run HTTP/1.1".
func requestLineLen(r *http.Request) int {
	return len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto)
}

// logPath returns p as a log line carries it: cut to maxLoggedPath bytes
// (on a UTF-8 boundary), with the length it had, if it is longer.
func logPath(p string) string {
	if len(p) <= maxLoggedPath {
		return p
	}
	cut := maxLoggedPath
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return p[:cut] + "... (" + strconv.Itoa(len(p)) + " bytes)"
}

// requestDone records a request that is over in the metrics and the
// access log. aborted is set if its handler panicked.
func (s *Server) requestDone(st *requestState, r *http.Request, took time.Duration, aborted bool) {
	rec := &st.rec
	m := s.metrics
	m.inFlight.Add(-1)
	if rec.streamBytes != nil {
		m.streamsOpen.Add(-1)
	}
	route := st.route
	if route == "" {
		route = routeUnmatched
	}
	m.observe(route, r.Method, rec.status, took)

	// Refusals before authentication stay at debug: anyone can cause
	// them, as fast as they like.
	ev := s.log.Debug()
	if (rec.status >= 400 && !st.anon) || aborted {
		ev = s.log.Info()
	}
	if !ev.Enabled() {
		return
	}
	path := r.URL.Path
	if r.Method == http.MethodConnect {
		path = r.RequestURI // an authority-form target has no path
	}
	ev = ev.Str("request_id", st.id).Str("method", r.Method).Str("path", logPath(path)).Int("status", rec.status).
		Int64("bytes", rec.bytes).Float64("duration_ms", logfield.DurationMS(took)).Str("remote", r.RemoteAddr)
	if aborted {
		ev = ev.Bool("aborted", true)
	}
	ev.Msg("request")
}

// labelRoute tells the access middleware which route matched; the router
// calls it for a match only.
func (s *Server) labelRoute(r *http.Request, template string) {
	stateOf(r).route = template
}

// labelUnrouted labels a request refused before routing (a 401, a 400 for
// two Authorization headers) with the route it would have reached, if any:
// the rare path pays for the match.
func (s *Server) labelUnrouted(r *http.Request) {
	st, ok := lookupState(r)
	if !ok || st.route != "" {
		return
	}
	if tpl, ok := s.router.Match(r); ok {
		st.route = tpl
	}
}
