package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
)

// A large raw /write_stdin body is moved from the socket into the
// process's stdin pipe with splice(2), never through the agent's memory:
// copied, it would cross user space twice (socket to buffer, buffer to
// pipe) and halve the throughput a local pipe gets. net/http offers no
// way to splice a body, so the handler takes the connection over
// (Hijack), reads the body itself (what net/http had buffered, then the
// socket), writes the reply and closes the connection. A client pays a
// new connection for its next request: worth it from a megabyte on.

// spliceMin is the smallest body that is spliced.
const spliceMin = 1 << 20

// isChunked reports whether r's body is chunked, over HTTP/1.x.
func isChunked(r *http.Request) bool {
	return r.ProtoMajor == 1 && len(r.TransferEncoding) == 1 && r.TransferEncoding[0] == "chunked"
}

// aLongTimeAgo is a deadline already past: it wakes a read.
var aLongTimeAgo = time.Unix(1, 0)

// canSplice reports whether r's raw body can be spliced: HTTP/1.x, with a
// Content-Length of at least spliceMin.
func canSplice(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.ContentLength >= spliceMin && len(r.TransferEncoding) == 0
}

// writeStdinSpliced serves the raw form of /write_stdin on the connection
// taken over from net/http, and reports whether it did: false, having
// done nothing, if the connection cannot be taken over. write writes the
// body into the stdin (a process's, or an exec's side channel's; see
// Process.WriteStdin), with ctx. A chunked body (an exec's side channel's
// only: see isChunked) is read as chunkedBody. If ended is not nil, its
// closing ends a read of the body waiting for the client.
func (s *Server) writeStdinSpliced(w http.ResponseWriter, r *http.Request, write func(ctx context.Context, src io.Reader) (int64, error), ended <-chan struct{}) bool {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	// Buffered holds what net/http read past the headers: the start of
	// the body. The rest is read from the socket underneath the agent's
	// connection wrapper, which splice needs (see Conn.NetConn).
	sock := conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		sock = nc.NetConn()
	}
	var body io.Reader
	if isChunked(r) {
		body = &chunkedBody{br: brw.Reader, sock: sock}
	} else {
		head := min(int64(brw.Reader.Buffered()), r.ContentLength)
		body = io.MultiReader(io.LimitReader(brw.Reader, head),
			&io.LimitedReader{R: sock, N: r.ContentLength - head})
	}
	stopWatch := func() {}
	if ended != nil {
		stop, watched := make(chan struct{}), make(chan struct{})
		go endBodyWith(ended, stop, watched, func() { _ = sock.SetReadDeadline(aLongTimeAgo) })
		stopWatch = func() { close(stop); <-watched } // before Linger sets its own deadline
	}
	src := body
	var cont *sendContinue
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// net/http sends it at the first read of the body, which this
		// handler no longer makes through it. Sent only once the write
		// has its turn, so that a refusal comes before the body.
		cont = &sendContinue{w: conn}
		src = io.MultiReader(cont, body)
	}
	n, err := write(r.Context(), src)
	stopWatch()
	// The headers set so far (X-Request-Id) are the reply's too.
	reply := &hijackedReply{header: w.Header().Clone()}
	if err != nil {
		// To writeError the reply is one of its own, not yet started,
		// whatever the access layer saw of the hijack.
		s.writeError(reply, withState(r, &requestState{id: requestID(r)}), s.rawWriteError(n, err))
	} else {
		encode(reply, http.StatusOK, stdinReply{Success: true, Written: n})
	}
	reply.send(r, conn)
	if err != nil && (cont == nil || cont.sent) {
		// The client may still be sending the rest of the body it
		// declared (one told 100 Continue, or one that did not wait for
		// it): read it, for at most connlimit.LingerTimeout, so that
		// closing does not reset the connection before the client has
		// read the reply. The rest is known here, unlike for the early
		// replies that closeAfterReply drains (connlimit.LingerMax): this
		// is the owner's request, and with a cap of its own a client still
		// sending its megabytes got "broken pipe" instead of the 409 far
		// more often than not.
		connlimit.Linger(conn, body)
	}
	return true
}

// sendContinue is a reader of nothing that, when first read, sends
// "100 Continue" on w.
type sendContinue struct {
	w    io.Writer
	sent bool
}

func (c *sendContinue) Read([]byte) (int, error) {
	if !c.sent {
		c.sent = true
		if _, err := io.WriteString(c.w, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return 0, err
		}
	}
	return 0, io.EOF
}

// hijackedReply is an http.ResponseWriter that keeps a reply for send to
// write on a hijacked connection, so that encode and writeError serve it
// as any other.
type hijackedReply struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (h *hijackedReply) Header() http.Header { return h.header }

func (h *hijackedReply) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

func (h *hijackedReply) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(b)
}

// send writes the reply to r on conn as HTTP/1.1, the connection's last,
// and records it for the access log.
func (h *hijackedReply) send(r *http.Request, conn net.Conn) {
	h.header.Set("Content-Length", strconv.Itoa(h.body.Len()))
	h.header.Set("Connection", "close")
	h.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	bw := bufio.NewWriter(conn)
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", h.code, http.StatusText(h.code))
	_ = h.header.Write(bw)
	_, _ = bw.WriteString("\r\n")
	_, _ = bw.Write(h.body.Bytes())
	_ = conn.SetWriteDeadline(time.Now().Add(connlimit.LingerTimeout)) // a client that reads nothing must not hold the handler
	_ = bw.Flush()                                                     // an error means the client left
	rec := &stateOf(r).rec
	rec.status, rec.bytes = h.code, int64(h.body.Len())
}
