package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

// openAPICheck returns next wrapped in a docChecker whose findings fail tb
// when it ends. Benchmarks get next itself: they measure the agent, not
// the checker.
func openAPICheck(tb testing.TB, basePath string, next http.Handler) http.Handler {
	tb.Helper()
	if _, ok := tb.(*testing.B); ok {
		return next
	}
	c := newDocChecker(tb, basePath, testSecret, next)
	// Registered before the caller's own cleanup, which closes the test
	// server and so waits for every handler: this one runs after it.
	tb.Cleanup(func() {
		for _, e := range c.errors() {
			tb.Errorf("openapi.yaml: %s", e)
		}
	})
	return c
}

// docChecker serves next and checks every request and reply against
// openapi.yaml with kin-openapi's openapi3filter: the route (method
// included), the request (a request the document rejects must be refused
// with a 4xx), and the reply's status, headers and body. An event stream
// is checked event by event as it passes, against the schema the
// document's x-sse-events gives its event name. Replies are passed on as
// they are written, never held back.
type docChecker struct {
	doc      *openAPIDoc
	basePath string // stripped before routing, as the agent does
	token    string // the bearer token the agent accepts
	next     http.Handler

	// mu guards errs, appended to by concurrent handlers.
	mu   sync.Mutex
	errs []string
}

// maxCheckErrors bounds what one checker keeps: past that, more of the
// same says nothing new.
const maxCheckErrors = 50

func newDocChecker(tb testing.TB, basePath, token string, next http.Handler) *docChecker {
	tb.Helper()
	d, err := loadOpenAPIDoc()
	if err != nil {
		tb.Fatal(err)
	}
	openapi3filter.RegisterBodyDecoder(ndjsonType, decodeNDJSON) // under kin-openapi's lock; the same each time
	return &docChecker{doc: d, basePath: basePath, token: token, next: next}
}

// decodeNDJSON reads an NDJSON reply as the array of its lines' values,
// which the document's schema for application/x-ndjson describes.
func decodeNDJSON(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	dec := json.NewDecoder(r)
	lines := []any{}
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return nil, err
		}
		lines = append(lines, v)
	}
}

func (c *docChecker) report(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < maxCheckErrors {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

// errors returns what the checker has found so far.
func (c *docChecker) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

func (c *docChecker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s, ok := c.next.(*Server); ok && s.exposedFor(r) != nil {
		c.next.ServeHTTP(w, r) // a preview by host name: the app's, not the document's
		return
	}
	ex := c.newExchange(r)
	body := &bodyRecorder{ReadCloser: r.Body, raw: ex.rawBody}
	served := new(http.Request)
	*served = *r
	served.Body = body
	cw := &checkWriter{ResponseWriter: w, ex: ex}
	c.next.ServeHTTP(cw, served)
	cw.end()
	ex.check(cw, body)
}

// exchange is one request being checked.
type exchange struct {
	c      *docChecker
	req    *http.Request // a copy to validate, without the base path
	what   string        // "METHOD /path", for messages
	route  *routers.Route
	params map[string]string
	// rawBody is set when the operation's request body is not JSON (an
	// upload): it is counted, not kept, and its content type is checked
	// by checkRawRequest.
	rawBody bool
}

func (c *docChecker) newExchange(r *http.Request) *exchange {
	req := r.Clone(context.WithoutCancel(r.Context()))
	req.URL.Path, req.URL.RawPath = cleanPath(req.URL.Path), "" // the agent serves //run as /run
	if c.basePath != "" {
		if rest, ok := strings.CutPrefix(req.URL.Path, c.basePath); ok && (rest == "" || rest[0] == '/') {
			req.URL.Path, req.URL.RawPath = rest, ""
			if rest == "" {
				req.URL.Path = "/"
			}
		}
	}
	ex := &exchange{c: c, req: req, what: r.Method + " " + r.URL.Path}
	ex.route, ex.params, _ = c.doc.router.FindRoute(req) // nil: not in the document
	ex.rawBody = ex.route != nil && rawBodyOperation(ex.route.Operation)
	if ex.route != nil {
		// kin-openapi takes an empty path parameter for a missing one, as
		// OpenAPI has them; a rest of the path (x-rest-of-path) may be
		// empty (/proxy/8000/), and is then checked as "/".
		if name, ok := ex.route.PathItem.Extensions["x-rest-of-path"].(string); ok && ex.params[name] == "" {
			ex.params[name] = "/"
		}
	}
	return ex
}

func (ex *exchange) report(format string, args ...any) {
	ex.c.report("%s: %s", ex.what, fmt.Sprintf(format, args...))
}

// check validates the request and the reply once the handler has returned.
func (ex *exchange) check(cw *checkWriter, body *bodyRecorder) {
	if ex.req.Method == http.MethodConnect {
		ex.checkConnect(cw)
		return
	}
	if ex.route == nil {
		ex.checkUnrouted(cw)
		return
	}
	if ex.everyOperation(cw.status) {
		ex.checkError(cw)
		return
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    ex.c.authenticate,
		IncludeResponseStatus: true, // a status the document does not list fails
		SkipSettingDefaults:   true,
	}
	// The agent reads only what it needs: a body it did not read to the
	// end (a 401, a 413) cannot be checked, nor one too big to keep.
	ex.req.Body = http.NoBody
	if !body.eof || body.json.overflow || ex.rawBody {
		opts.ExcludeRequestBody = true
	} else {
		ex.req.Body = io.NopCloser(bytes.NewReader(body.json.buf))
		ex.req.ContentLength = int64(len(body.json.buf))
		if len(body.json.buf) > 0 && !isRawBody(ex.req) {
			// The agent reads every body as JSON whatever its label
			// (curl -d says application/x-www-form-urlencoded), and the
			// document says so, except a raw body (/write_stdin's).
			ex.req.Header.Set("Content-Type", "application/json")
		}
	}
	in := &openapi3filter.RequestValidationInput{Request: ex.req, PathParams: ex.params, Route: ex.route, Options: opts}
	ctx := ex.req.Context()
	// A request the document rejects must not be carried out: the agent
	// accepting more than the document says is a field renamed, or one the
	// document does not know.
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && cw.status < 400 {
		ex.report("the document rejects the request, but the agent answered %d: %v", cw.status, err)
	}
	if ex.rawBody {
		ex.checkRawRequest(cw.status, body)
	}
	// A reply whose write failed (the client left, or stalled) was cut:
	// its status and headers are checked, its body cannot be.
	resp := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: cw.status,
		Header: cw.header, Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: cw.json.overflow || cw.binary != nil || cw.writeErr}}
	resp.SetBodyBytes(cw.json.buf)
	if err := openapi3filter.ValidateResponse(ctx, resp); err != nil {
		ex.report("reply %d: %v", cw.status, err)
	}
	ex.checkUnvalidated(in, cw)
	if cw.binary != nil {
		cw.binary.check(ex, cw)
	}
}

// checkUnrouted checks the reply to a request the document has no
// operation for: it must be a JSON error, as the document's description
// says (404 for a path, 405 for a method, 401 before either).
func (ex *exchange) checkUnrouted(cw *checkWriter) {
	if ex.anyMethod() {
		return // a method the document cannot name, forwarded to an app: its reply
	}
	if cw.status < 400 {
		ex.report("not an operation of the document, but the agent answered %d", cw.status)
		return
	}
	ex.checkError(cw)
}

// everyOperation reports whether status is one the document's extension
// x-every-operation lists, which any operation may answer (414, before
// routing), and the operation does not list itself.
func (ex *exchange) everyOperation(status int) bool {
	xe, _ := ex.c.doc.doc.Extensions["x-every-operation"].(map[string]any)
	responses, _ := xe["responses"].(map[string]any)
	_, ok := responses[strconv.Itoa(status)]
	return ok && ex.route.Operation.Responses.Value(strconv.Itoa(status)) == nil
}

// checkError checks that a reply is a JSON Error.
func (ex *exchange) checkError(cw *checkWriter) {
	if ct := cw.header.Get("Content-Type"); ct != "application/json" {
		ex.report("error reply %d with Content-Type %q, not application/json", cw.status, ct)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(cw.json.buf))
	if err == nil {
		err = ex.c.doc.schemas[errorSchemaRef].Validate(v)
	}
	if err != nil {
		ex.report("error reply %d is not an Error: %v", cw.status, err)
	}
}

// anyMethod reports whether the request's path is that of an operation
// that takes every method (x-any-method), its method one the document
// cannot name (PROPFIND).
func (ex *exchange) anyMethod() bool {
	get := ex.req.Clone(ex.req.Context())
	get.Method = http.MethodGet
	route, _, err := ex.c.doc.router.FindRoute(get)
	return err == nil && route.PathItem.Extensions["x-any-method"] == true
}

// checkConnect checks the reply to a CONNECT, which the document describes
// in its x-connect extension: a status it lists; 200 only for a tunnel
// opened (the connection hijacked); any other a JSON Error, and 407 with
// Proxy-Authenticate.
func (ex *exchange) checkConnect(cw *checkWriter) {
	xc, _ := ex.c.doc.doc.Extensions["x-connect"].(map[string]any)
	responses, _ := xc["responses"].(map[string]any)
	if _, ok := responses[strconv.Itoa(cw.status)]; !ok {
		ex.report("status %d is not one of x-connect's responses", cw.status)
	}
	switch {
	case cw.status == http.StatusOK:
		if !cw.hijacked {
			ex.report("200 without a tunnel")
		}
		return
	case cw.status == http.StatusProxyAuthRequired && !strings.HasPrefix(cw.header.Get("Proxy-Authenticate"), "Bearer"):
		ex.report("407 without Proxy-Authenticate: Bearer")
	}
	ex.checkError(cw)
}

// authenticate is the checker's openapi3filter.AuthenticationFunc: it
// accepts exactly one Authorization header with the agent's bearer token,
// or, for the document's webSocketToken scheme, a WebSocket upgrade that
// offers the token as a subprotocol.
func (c *docChecker) authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if s := in.SecurityScheme; s.Type == "apiKey" && s.In == "header" && s.Name == "Sec-WebSocket-Protocol" {
		if token, ok := wsToken(in.RequestValidationInput.Request); !ok || token != c.token {
			return in.NewError(errors.New("no WebSocket upgrade offering the agent's token as a subprotocol"))
		}
		return nil
	}
	if s := in.SecurityScheme; s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return in.NewError(fmt.Errorf("the checker knows no security scheme %q", in.SecuritySchemeName))
	}
	req := in.RequestValidationInput.Request
	values := req.Header.Values("Authorization")
	if token, ok := wsToken(req); ok && len(values) == 0 {
		// A browser's WebSocket carries the token as a subprotocol, as
		// the document's description says.
		if token != c.token {
			return in.NewError(errors.New("not the agent's bearer token"))
		}
		return nil
	}
	if len(values) != 1 {
		return in.NewError(fmt.Errorf("%d Authorization headers", len(values)))
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) != c.token {
		return in.NewError(errors.New("not the agent's bearer token"))
	}
	return nil
}

// bodyRecorder keeps what the handler reads of the request body, or only
// counts it if it is not JSON.
type bodyRecorder struct {
	io.ReadCloser
	json jsonSkeleton
	raw  bool  // count only
	n    int64 // bytes read
	eof  bool  // the handler read the body to its end
}

func (b *bodyRecorder) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if !b.raw {
		b.json.Write(p[:n])
	}
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// checkWriter passes a reply on as it is written and keeps what the
// checker needs of it: the status, the headers as they were sent, and the
// body, or for an event stream each event as it passes.
type checkWriter struct {
	http.ResponseWriter
	ex       *exchange
	status   int // 0 until the status is sent
	header   http.Header
	json     jsonSkeleton
	events   *eventChecker // nil unless the reply is an event stream
	binary   *binaryReply  // nil unless the document says the reply is bytes (a download)
	writeErr bool          // a write failed: the client left, the rest is lost
	hijacked bool          // a tunnel, a WebSocket or a spliced write took the connection over
	tee      *teeConn      // the connection of a hijacked reply written by hand, kept for end; nil for others
}

// Hijack lets a tunnel, a WebSocket or a spliced /write_stdin take the
// connection over, and notes it. A tunnel's or a WebSocket's status is
// then written past the checker, by hand (CONNECT's 200) or by the
// upgrade (101, sent through WriteHeader before the hijack), and what
// follows is another protocol. Any other handler writes a whole HTTP
// reply by hand (/write_stdin's spliced replies, a refused WebSocket
// upgrade's 400 with its own reason phrase, a reverse proxy's 101): the
// connection is handed over wrapped, so that end can read that reply from
// what was written and check it as any other.
func (cw *checkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(cw.ResponseWriter).Hijack()
	if err != nil {
		return c, brw, err
	}
	cw.hijacked = true
	if cw.status != 0 || cw.ex.req.Method == http.MethodConnect {
		return c, brw, nil
	}
	cw.tee = &teeConn{Conn: c}
	brw.Writer.Reset(cw.tee)
	return cw.tee, brw, nil
}

func (cw *checkWriter) WriteHeader(code int) {
	// 101 is final: the connection is then the WebSocket's, hijacked
	// from the server, and nothing more passes through the checker.
	if cw.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		cw.started(code)
	}
	cw.ResponseWriter.WriteHeader(code)
}

func (cw *checkWriter) Write(p []byte) (int, error) {
	if cw.status == 0 {
		cw.started(http.StatusOK)
	}
	n, err := cw.ResponseWriter.Write(p)
	switch {
	case cw.events != nil:
		cw.events.write(p[:n])
	case cw.binary != nil:
		cw.binary.write(p[:n])
	default:
		cw.json.Write(p[:n])
	}
	if err != nil {
		cw.writeErr = true
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's Flush and
// deadlines, as it does through the agent's own recorder.
func (cw *checkWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

func (cw *checkWriter) started(code int) {
	cw.status, cw.header = code, cw.Header().Clone()
	if mt, _, _ := mime.ParseMediaType(cw.header.Get("Content-Type")); mt == "text/event-stream" && !cw.ex.opaque(code) {
		cw.events = cw.ex.eventChecker(code)
	} else {
		cw.binary = cw.ex.binaryReply(code, cw.header)
	}
}

// end completes the reply once the handler has returned.
func (cw *checkWriter) end() {
	if cw.tee != nil {
		cw.readHijackedReply()
	}
	switch {
	case cw.status != 0:
	case cw.hijacked && cw.ex.req.Method == http.MethodConnect:
		cw.started(http.StatusOK) // 200 Connection Established
	case cw.hijacked:
		cw.started(http.StatusSwitchingProtocols)
	default: // net/http sends 200 and no body
		cw.started(http.StatusOK)
	}
	if cw.events != nil {
		cw.events.end(cw.writeErr)
	}
}

// eventChecker checks an event stream event by event against the events
// the document lists for it.
type eventChecker struct {
	ex      *exchange
	events  map[string]string // event name → $ref of its data's schema
	withID  map[string]bool
	pending []byte // the start of an event whose end has not been written yet
}

// opaque reports whether the document says the reply with status may be
// anything ("*/*" and no event stream of the agent's): a preview's reply,
// which is the app's.
func (ex *exchange) opaque(status int) bool {
	if ex.route == nil {
		return false
	}
	resp := ex.route.Operation.Responses.Status(status)
	if resp == nil {
		resp = ex.route.Operation.Responses.Default()
	}
	if resp == nil || resp.Value == nil {
		return false
	}
	_, any := resp.Value.Content["*/*"]
	_, stream := resp.Value.Content["text/event-stream"]
	return any && !stream
}

func (ex *exchange) eventChecker(status int) *eventChecker {
	e := &eventChecker{ex: ex}
	if ex.route == nil {
		return e // reported by check; every event is then unknown
	}
	resp := ex.route.Operation.Responses.Status(status)
	if resp == nil {
		return e
	}
	if mt := resp.Value.Content["text/event-stream"]; mt != nil {
		e.events, e.withID, _ = sseEvents(mt) // loadOpenAPIDoc checked them
	}
	return e
}

// write takes the bytes of the stream as they pass and checks every event
// they complete. Events end with a blank line; data never holds a raw
// newline, so "\n\n" ends an event and nothing else.
func (e *eventChecker) write(p []byte) {
	e.pending = append(e.pending, p...)
	i := bytes.LastIndex(e.pending, []byte("\n\n"))
	if i < 0 {
		return
	}
	e.parse(e.pending[:i+2])
	e.pending = append(e.pending[:0], e.pending[i+2:]...)
}

// end checks what is left once the handler has returned.
func (e *eventChecker) end(writeErr bool) {
	e.parse(e.pending)
	if len(bytes.TrimSpace(e.pending)) > 0 && !writeErr {
		e.ex.report("the stream ended inside an event: %q", e.pending)
	}
}

func (e *eventChecker) parse(b []byte) {
	r := sse.NewReader(bytes.NewReader(b))
	for {
		ev, err := r.Next()
		if err != nil {
			return // io.EOF, or an unfinished event that end reports
		}
		e.check(ev)
	}
}

func (e *eventChecker) check(ev sse.Event) {
	name := string(ev.Name)
	ref, ok := e.events[name]
	switch {
	case name == "":
		e.ex.report("an event without an event: line (data %q)", ev.Data)
		return
	case !ok:
		e.ex.report("event %q is not in the document's x-sse-events for this reply", name)
		return
	case bytes.IndexByte(ev.Data, '\n') >= 0:
		e.ex.report("event %q: its data spans several data: lines: %q", name, ev.Data)
		return
	case (ev.ID != nil) != e.withID[name]:
		e.ex.report("event %q: id: line %q, but x-sse-events-with-id says %v", name, ev.ID, e.withID[name])
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(ev.Data))
	if err == nil {
		err = e.ex.c.doc.schemas[ref].Validate(v)
	}
	if err != nil {
		e.ex.report("event %q does not match %s: %v (data %.200q)", name, ref, err, ev.Data)
	}
}

// readHijackedReply reads the reply the handler wrote on the connection it
// took over: interim 100 Continue replies, then the final one, whose
// status, headers and body the checks then see. A 101 (an upgrade) ends
// the reply: what follows is another protocol.
func (cw *checkWriter) readHijackedReply() {
	br := bufio.NewReader(bytes.NewReader(cw.tee.written()))
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			cw.ex.report("hijacked connection: no readable HTTP reply: %v", err)
			return
		}
		if resp.StatusCode == http.StatusContinue {
			continue
		}
		cw.status, cw.header = resp.StatusCode, resp.Header
		if resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(resp.Body)
			cw.json.Write(body)
		}
		return
	}
}

// teeConn is a hijacked connection that keeps a copy of what is written
// on it. NetConn and CloseWrite reach the connection underneath, as the
// agent's own Conn lets them.
type teeConn struct {
	net.Conn
	mu  sync.Mutex // guards buf: writes may come from several goroutines
	buf bytes.Buffer
}

func (t *teeConn) Write(p []byte) (int, error) {
	n, err := t.Conn.Write(p)
	t.mu.Lock()
	if t.buf.Len() < maxSkeleton {
		t.buf.Write(p[:n])
	}
	t.mu.Unlock()
	return n, err
}

func (t *teeConn) written() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf.Bytes())
}

func (t *teeConn) NetConn() net.Conn {
	if nc, ok := t.Conn.(interface{ NetConn() net.Conn }); ok {
		return nc.NetConn()
	}
	return t.Conn
}

func (t *teeConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
