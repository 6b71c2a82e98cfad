package server

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
)

// Request bodies are read under a deadline: a client that declares a body
// and sends it slowly, or not at all, would otherwise hold its connection,
// and a file descriptor, for ever. A JSON body is small, so decode gives
// it BodyTimeout in all; a streamed body (an upload) gets a deadline that
// each read making progress pushes back, with progressReader. Either
// clears the deadline once the body is read, because net/http then reads
// the connection in the background, without a deadline of its own, to
// cancel the request's context when the client leaves: a deadline left
// in force would cancel it, and a long /run with it.
//
// A reply sent before the body was read to its end closes the connection
// (see closeAfterReply): to keep it, net/http would first read the rest
// of the body, which a client that never sends it makes wait for ever.

// bodyTimeout returns the server's BodyTimeout.
func bodyTimeout(r *http.Request) time.Duration { return stateOf(r).timeout() }

// bodyDeadline sets the read deadline of the connection of r, which w
// answers, to BodyTimeout from now, and returns the function that clears
// it. A ResponseWriter without deadlines (a test's recorder) goes without.
func bodyDeadline(w http.ResponseWriter, r *http.Request) (clear func()) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(bodyTimeout(r))) != nil {
		return func() {}
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}

// markBodyRead records that r's body has been read to its end.
func markBodyRead(r *http.Request) { stateOf(r).bodyRead = true }

// bodyUnread reports whether the request has a body that may not have
// been read to its end.
func bodyUnread(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return false
	}
	return !stateOf(r).bodyRead
}

// closeAfterReply makes the reply about to be sent the connection's last.
// "Connection: close" keeps net/http from reading the rest of the body
// before it sends the reply; the short read deadline bounds what it
// still reads of it after (up to 256 KiB, hoping to end the body
// cleanly), so that closing does not reset the connection before a
// client still sending has read the reply. Call it before the reply's
// status is written.
func closeAfterReply(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(connlimit.LingerTimeout))
}

// progressReader reads a streamed request body (an upload, a raw stdin)
// under a deadline that every read pushes back by idle: a body may take
// as long as it needs, but one that makes no progress for idle ends with
// a read error that wraps os.ErrDeadlineExceeded. The deadline is pushed
// back at most every idle/8, so a stall is cut after between 7/8 of idle
// and idle; a zero idle sets no deadline. Call Done when done reading,
// before the reply.
type progressReader struct {
	r        io.Reader
	w        http.ResponseWriter
	st       *requestState // the request's, marked once the body is read
	rc       *http.ResponseController
	idle     time.Duration
	extended time.Time // when the deadline was last pushed back; zero before the first read
	eof      bool      // the body was read to its end
}

// newProgressReader returns a progressReader of the body of r, which w
// answers, with the server's BodyTimeout as idle.
func newProgressReader(w http.ResponseWriter, r *http.Request) *progressReader {
	st := stateOf(r)
	return &progressReader{r: r.Body, w: w, st: st, rc: http.NewResponseController(w), idle: st.timeout()}
}

func (p *progressReader) Read(b []byte) (int, error) {
	if now := time.Now(); p.idle > 0 && now.Sub(p.extended) >= p.idle/8 {
		_ = p.rc.SetReadDeadline(now.Add(p.idle)) // ErrNotSupported: a test's recorder
		p.extended = now
	}
	n, err := p.r.Read(b)
	if err == io.EOF {
		p.eof = true
		p.st.bodyRead = true
	}
	return n, err
}

// Done clears the deadline if the body was read to its end. If it was
// not (the read failed, or the handler stopped early), the reply is made
// the connection's last, as writeError does, since net/http would
// otherwise wait for the rest of the body before sending it.
func (p *progressReader) Done() {
	switch {
	case p.eof:
		_ = p.rc.SetReadDeadline(time.Time{})
	default:
		closeAfterReply(p.w)
	}
}

// largeBody is the size past which a JSON request body counts against
// the server's budget of large bodies (Config.BodyBudget): the API's
// ordinary requests are far smaller and never wait.
const largeBody = 1 << 20

// takeBodyBudget waits until r's JSON body, if it is large, fits the
// server's budget of large bodies being read and decoded at once, and
// returns the function that gives its share back. A body of unknown
// length (chunked) counts as maxBody. Past the body timeout it gives up
// with a 503: the request was not at fault, the agent was busy. A
// request that did not come through the access layer (a test's) has no
// budget.
func takeBodyBudget(r *http.Request, maxBody int64) (release func(), err error) {
	st := stateOf(r)
	n := r.ContentLength
	if n < 0 {
		n = maxBody
	}
	n = min(n, maxBody) // a longer one is refused by the first read past it
	if st.bodies == nil || n <= largeBody {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), st.timeout())
	defer cancel()
	if err := st.bodies.Acquire(ctx, n); err != nil {
		return nil, errorf(http.StatusServiceUnavailable,
			"too many large request bodies at once: this one (%d bytes) waited %s for its turn; retry, or send big files to PUT /files", n, st.timeout())
	}
	return func() { st.bodies.Release(n) }, nil
}
