package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/checkpoint"
	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/sessions"
	"github.com/sandbox-executor/sandbox-executor/terminals"
	"github.com/sandbox-executor/sandbox-executor/watch"
)

// apiFunc is a handler that returns its error instead of writing it; wrap
// turns it into an http.Handler whose errors go through writeError.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

// httpError is an error with the status and message the client sees.
// extra holds more fields of the error body, for the documented replies
// that carry them (409's current_port, kill_process's success:false).
type httpError struct {
	code  int
	msg   string
	extra map[string]any
	cause error // for the log only, never the client; may be nil
}

func (e *httpError) Error() string { return e.msg }

func (e *httpError) Unwrap() error { return e.cause }

func errorf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// fieldsError adds fields to the error body of whatever reply its error
// gets, for an endpoint all of whose error replies carry them
// (kill_process's success:false).
type fieldsError struct {
	error
	fields map[string]any
}

func (e *fieldsError) Unwrap() error { return e.error }

func withFields(err error, fields map[string]any) error { return &fieldsError{err, fields} }

func (s *Server) wrap(h apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// errorStatus is the reply a domain package's sentinel error gets: its
// status, and the fields the reply carries beside "error".
type errorStatus struct {
	err   error
	code  int
	extra map[string]any // may be nil
	// bare replies with the sentinel's text alone, without what its
	// wrapper added.
	bare bool
}

// errorStatuses maps the domain packages' sentinel errors to replies. The
// rows are scanned in order with errors.Is, and the first that matches
// wins; an error that matches none is a 500.
var errorStatuses = [...]errorStatus{
	{err: executor.ErrInvalidDir, code: http.StatusBadRequest},
	{err: executor.ErrInvalidCommand, code: http.StatusBadRequest},
	{err: executor.ErrBusy, code: http.StatusServiceUnavailable},
	{err: procs.ErrTooMany, code: http.StatusServiceUnavailable},
	{err: executor.ErrInputBudget, code: http.StatusServiceUnavailable},
	{err: sessions.ErrEnvBudget, code: http.StatusServiceUnavailable},
	{err: procs.ErrNotFound, code: http.StatusBadRequest, extra: map[string]any{"success": false}},
	{err: procs.ErrNotRunning, code: http.StatusBadRequest, extra: map[string]any{"success": false}},
	{err: terminals.ErrNotFound, code: http.StatusNotFound},
	{err: terminals.ErrNotRunning, code: http.StatusConflict},
	{err: terminals.ErrTooMany, code: http.StatusServiceUnavailable},
	{err: terminals.ErrClosed, code: http.StatusServiceUnavailable},
	{err: proxy.ErrInvalidPort, code: http.StatusBadRequest, bare: true},
	{err: sessions.ErrNotFound, code: http.StatusNotFound},
	{err: sessions.ErrExists, code: http.StatusConflict},
	{err: sessions.ErrInvalid, code: http.StatusBadRequest},
	{err: executor.ErrUnknownUser, code: http.StatusBadRequest},
	{err: sessions.ErrUserMismatch, code: http.StatusBadRequest},
	{err: executor.ErrNotPrivileged, code: http.StatusForbidden},
	{err: sessions.ErrTooMany, code: http.StatusServiceUnavailable},
	{err: sessions.ErrClosed, code: http.StatusServiceUnavailable},
	{err: executor.ErrLimitsUnsupported, code: http.StatusNotImplemented, bare: true},
	{err: procs.ErrInvalidName, code: http.StatusBadRequest},
	{err: procs.ErrNameTaken, code: http.StatusConflict},
	{err: contexts.ErrNotFound, code: http.StatusNotFound, bare: true},
	{err: contexts.ErrLanguage, code: http.StatusBadRequest},
	{err: contexts.ErrNoInterpreter, code: http.StatusNotImplemented},
	{err: contexts.ErrTooMany, code: http.StatusServiceUnavailable},
	{err: contexts.ErrBusy, code: http.StatusConflict, bare: true},
	{err: contexts.ErrQueueFull, code: http.StatusServiceUnavailable, bare: true},
	{err: contexts.ErrClosed, code: http.StatusServiceUnavailable},
	{err: contexts.ErrLimitsTooLow, code: http.StatusBadRequest},
	{err: watch.ErrTooMany, code: http.StatusServiceUnavailable},
	{err: watch.ErrTooManyDirs, code: http.StatusServiceUnavailable},
	{err: watch.ErrNotFound, code: http.StatusNotFound},
	{err: watch.ErrUnknown, code: http.StatusNotFound},
	{err: watch.ErrClosed, code: http.StatusServiceUnavailable},
	{err: checkpoint.ErrNotFound, code: http.StatusNotFound},
	{err: checkpoint.ErrNoPath, code: http.StatusNotFound},
	{err: checkpoint.ErrNotDir, code: http.StatusBadRequest},
	{err: checkpoint.ErrDamaged, code: http.StatusInternalServerError, bare: true},
}

// replyOf returns the status, message and extra fields of the reply err
// gets: an *httpError's own, 413 for a body past its limit, then the first
// row of errorStatuses that matches; else 500 and a message that says
// nothing of the cause.
func replyOf(err error) (code int, msg string, extra map[string]any) {
	var he *httpError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he.code, he.msg, he.extra
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large (limit %d bytes)", tooLarge.Limit), nil
	}
	for _, row := range errorStatuses {
		if errors.Is(err, row.err) {
			if row.bare {
				return row.code, row.err.Error(), row.extra
			}
			return row.code, err.Error(), row.extra
		}
	}
	return http.StatusInternalServerError, "internal error", nil
}

// writeError is the one place that turns an error into a response. The
// details of a 500 go to the log, never to the client; the reason of a
// 4xx goes to the log at debug level. Once a stream has started, the
// status is sent and nothing more can be said, so it only logs.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg, extra := replyOf(err)
	// 502 and 504 are the sandbox's app's doing (nothing listening, no
	// answer), not the agent's: the access log has them.
	if code >= 500 && code != http.StatusBadGateway && code != http.StatusGatewayTimeout {
		logged := err
		var he *httpError
		if errors.As(err, &he) && he.cause != nil {
			logged = he.cause
		}
		s.log.Error().Err(logged).Str("request_id", requestID(r)).Str("path", logPath(r.URL.Path)).Msg("request failed")
	}
	if st := stateOf(r); st.started() {
		s.log.Debug().Err(err).Str("request_id", st.id).Str("path", logPath(r.URL.Path)).Msg("error after the response started")
		return
	}
	if code < 500 {
		s.log.Debug().Str("request_id", requestID(r)).Int("status", code).Str("error", msg).
			Str("path", logPath(r.URL.Path)).Msg("request refused")
	}
	if bodyUnread(r) {
		closeAfterReply(w)
	}
	body := map[string]any{"error": msg}
	for k, v := range extra {
		body[k] = v
	}
	var fe *fieldsError
	if errors.As(err, &fe) {
		for k, v := range fe.fields {
			body[k] = v
		}
	}
	var ur *upgradeRefusal
	if errors.As(err, &ur) && writeWithReason(w, r, code, ur.reason, body) {
		return
	}
	encode(w, code, body)
}

// encode writes v as JSON with the given status. Every JSON reply carries
// Content-Type application/json: one SDK parses a body only with it.
func encode(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	// Not escaped for HTML, as /run and the event streams write them
	// (sse.AppendJSONString): "<secret>", not "\u003csecret\u003e". The
	// replies are never embedded in a page, and the JSON is the same.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // an error here means the client left
}

// decode reads a JSON request body of at most maxBody bytes into a T. An
// empty body decodes as {} so that required fields are reported by name.
// Unknown fields are ignored: clients send more than the document names.
// Anything but white space after the object is an error. The body must
// arrive within the server's BodyTimeout (408 if not).
func decode[T any](w http.ResponseWriter, r *http.Request, maxBody int64) (T, error) {
	var v T
	release, err := takeBodyBudget(r, maxBody)
	if err != nil {
		return v, err
	}
	defer release()
	defer bodyDeadline(w, r)() // cleared once read, or the server's watch on the connection would fail
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	err = dec.Decode(&v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil || errors.As(err, &typeErr):
		// Reading the body to its end is also what lets net/http watch
		// the connection, and so cancel r.Context() when the client leaves.
		if end := bodyEnd(dec); end != nil {
			err = end
		} else {
			markBodyRead(r)
		}
	case errors.Is(err, io.EOF): // an empty body
		markBodyRead(r)
	}
	var tooLarge *http.MaxBytesError
	var he *httpError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return v, nil
	case errors.As(err, &tooLarge), errors.As(err, &he):
		return v, err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return v, errorf(http.StatusRequestTimeout, "request body not received within %s", bodyTimeout(r))
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			want := jsonKind(typeErr.Type.Kind().String())
			if typeErr.Type == reflect.TypeFor[stringOrNumber]() {
				want = "a string or a number"
			}
			return v, errorf(http.StatusBadRequest, "invalid request: field %q must be %s", jsonPath(reflect.TypeFor[T](), typeErr.Field), want)
		}
		return v, errorf(http.StatusBadRequest, "invalid request: body must be a JSON object")
	default:
		return v, errorf(http.StatusBadRequest, "invalid request: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// decodeID reads a request body {"id": ...} as decode does, for the
// endpoints that take only an id; an id missing or empty is 400.
func decodeID(w http.ResponseWriter, r *http.Request, maxBody int64) (string, error) {
	req, err := decode[struct {
		ID string `json:"id"`
	}](w, r, maxBody)
	if err != nil {
		return "", err
	}
	if req.ID == "" {
		return "", errorf(http.StatusBadRequest, "id is required")
	}
	return req.ID, nil
}

// jsonPath returns the path of a field as the client wrote it from
// encoding/json's UnmarshalTypeError.Field, which names a field of an
// embedded struct through the struct's Go type ("ownerFields.user"): the
// names of embedded structs are dropped ("user").
func jsonPath(t reflect.Type, field string) string {
	var out []string
	for seg := range strings.SplitSeq(field, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			out, t = append(out, seg), nil
			continue
		}
		if f, ok := t.FieldByName(seg); ok && f.Anonymous && f.Tag.Get("json") == "" {
			t = f.Type // an embedded struct: its fields are the outer object's
			continue
		}
		out, t = append(out, seg), jsonFieldType(t, seg)
	}
	return strings.Join(out, ".")
}

// jsonFieldType returns the type of t's field whose JSON name is name, or
// nil if there is none.
func jsonFieldType(t reflect.Type, name string) reflect.Type {
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f.Type
		}
	}
	return nil
}

// bodyEnd reads what follows the JSON value dec has decoded: nil if that
// is white space to the end of the body, else the error to report.
func bodyEnd(dec *json.Decoder) error {
	_, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil, isSyntaxError(err):
		return errorf(http.StatusBadRequest, "invalid request: unexpected data after the JSON object")
	}
	return err // a read error: too large, too slow, the client left
}

func isSyntaxError(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "int", "int64", "int32", "uint16", "float64":
		return "a number"
	}
	return "of another type"
}

// stringOrNumber is a field that clients send either as a JSON string, as
// the document says, or as a number: a port, a signal. It holds the text
// of either, trimmed.
type stringOrNumber string

func (f *stringOrNumber) UnmarshalJSON(b []byte) error {
	var n json.Number // also takes a string that holds a number
	if err := json.Unmarshal(b, &n); err == nil {
		*f = stringOrNumber(n.String())
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		// The decoder adds the field's name to this error.
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[stringOrNumber]()}
	}
	*f = stringOrNumber(strings.TrimSpace(str))
	return nil
}

// accepts reports whether one of r's Accept headers names the media type
// want (parameters aside).
func accepts(r *http.Request, want string) bool {
	for _, a := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(a, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == want {
				return true
			}
		}
	}
	return false
}
