package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// defaultBodyTimeout is Config.BodyTimeout's default, for a request that
// did not come through the access layer (a test's).
const defaultBodyTimeout = 30 * time.Second

// requestState is what the layers and helpers of the server know of one
// request. The access layer puts it in the request's context, as net/http
// carries per-request data, and everything after reads it from there
// (stateOf): a ResponseWriter wrapper between the access layer and a
// handler then switches off no budget, deadline or request id.
//
// It has no lock: like the ResponseWriter, it is used by the layers and
// the handler in turn, never by two goroutines at once.
type requestState struct {
	id    string // the request's id, for every log line about it
	route string // the template of the route that matched; "" if none did
	// rec is the reply as the access layer sees it: its status, and
	// whether it has started, for writeError and the access log.
	rec recorder
	// bodyRead is set by decode once the request body has been read to
	// its end: an error reply can then keep the connection.
	bodyRead bool
	// bodyTimeout is the server's BodyTimeout, for decode and uploads;
	// if zero, defaultBodyTimeout.
	bodyTimeout time.Duration
	// bodies is the server's budget of large JSON bodies, for decode; if
	// nil, there is none.
	bodies *semaphore.Weighted
	// anon is set for a request refused before authentication (a 401, a
	// 407, a 414): its access-log line stays at debug.
	anon bool
}

// stateKey is the context key of a request's *requestState.
type stateKey struct{}

// withState returns r with st as its state.
func withState(r *http.Request, st *requestState) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
}

// stateOf returns r's state. A request that did not come through the
// access layer (a test's) gets a fresh one, with the defaults: its
// markings are lost, as there is nobody to read them.
func stateOf(r *http.Request) *requestState {
	if st, ok := lookupState(r); ok {
		return st
	}
	return new(requestState)
}

// lookupState returns r's state and true, or false if r did not come
// through the access layer.
func lookupState(r *http.Request) (*requestState, bool) {
	st, ok := r.Context().Value(stateKey{}).(*requestState)
	return st, ok
}

// timeout returns the server's BodyTimeout, or its default.
func (st *requestState) timeout() time.Duration {
	if st.bodyTimeout > 0 {
		return st.bodyTimeout
	}
	return defaultBodyTimeout
}

// started reports whether the reply's status has been sent (or the
// connection taken over): writeError can then say nothing more.
func (st *requestState) started() bool { return st.rec.status != 0 }

// requestID returns the id of r, for a log line; "" for a request that did
// not come through the access layer (a test's).
func requestID(r *http.Request) string { return stateOf(r).id }

// markAnon records that the request is refused before authentication,
// for the access log.
func markAnon(r *http.Request) { stateOf(r).anon = true }

// hijacked records, for the access log, the status a handler wrote by
// hand on a connection it hijacked.
func hijacked(r *http.Request, status int) { stateOf(r).rec.status = status }

// recorder remembers the status and size of a response, for the access
// log and for writeError, which must not write a second status. The access
// layer hands it to the next layer as the ResponseWriter.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// streamBytes, set by newStream, also counts what is written: the
	// response is an event stream.
	streamBytes *atomic.Uint64
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	if rec.streamBytes != nil {
		rec.streamBytes.Add(uint64(n))
	}
	return n, err
}

// ReadFrom lets io.Copy to the response reach the connection's sendfile
// or splice, which the response's own ReadFrom uses.
func (rec *recorder) ReadFrom(src io.Reader) (int64, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := io.Copy(rec.ResponseWriter, src)
	rec.bytes += n
	if rec.streamBytes != nil {
		rec.streamBytes.Add(uint64(n))
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's Flush and
// deadlines.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// Hijack hands the connection over to a tunnel or a WebSocket. The access
// log then shows 101, unless the handler writes its own status by hand
// and says so (CONNECT's 200: see hijacked).
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(rec.ResponseWriter).Hijack()
	if err == nil && rec.status == 0 {
		rec.status = http.StatusSwitchingProtocols
	}
	return c, brw, err
}
