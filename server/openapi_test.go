package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sandboxexecutor "github.com/sandbox-executor/sandbox-executor"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// openapi.yaml loads, is valid OpenAPI 3.1 (its examples included), and
// every event payload it names compiles.
func TestOpenAPIDocumentValid(t *testing.T) {
	d, err := loadOpenAPIDoc()
	require.NoError(t, err)
	assert.Len(t, eventStreamMediaTypes(d.doc), 7, "the 200s of /run_streaming, of both /process_logs_streaming, of /run_code, of both /watch and of /watches/{id}/events")
}

// Every route of the router is an operation of the document, and every
// operation a route, method included. With BASE_PATH the router may hold
// the prefixed routes as well: they are the same operations.
func TestOpenAPIRoutesMatchDocument(t *testing.T) {
	d, err := loadOpenAPIDoc()
	require.NoError(t, err)
	var inDoc []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			inDoc = append(inDoc, method+" "+path)
		}
	}
	slices.Sort(inDoc)

	muxVar := regexp.MustCompile(`\{([^{}:]+):[^{}]*\}`) // {name:pattern} is {name} in OpenAPI
	for _, base := range []string{"", "/base"} {
		_, s := newTestServer(t, testServer{cfg: Config{BasePath: base}, runner: &executor.Runner{}})
		var inRouter []string
		s.router.walk(func(tpl string, methods []string) {
			if rest, ok := strings.CutPrefix(tpl, base); base != "" && ok && strings.HasPrefix(rest, "/") {
				tpl = rest
			}
			tpl = muxVar.ReplaceAllString(tpl, "{$1}")
			if methods == nil {
				// A route that takes every method is the document's path
				// that says so with x-any-method, whose operations are
				// the methods OpenAPI can name.
				item := d.doc.Paths.Value(tpl)
				require.True(t, item != nil && item.Extensions["x-any-method"] == true,
					"route %s takes every method, which the document does not say with x-any-method", tpl)
				for m := range item.Operations() {
					methods = append(methods, m)
				}
			}
			for _, m := range methods {
				inRouter = append(inRouter, m+" "+tpl)
			}
		})
		// What is not a route is a JSON 404 or 405, as the document says.
		assert.NotNil(t, s.router.NotFoundHandler)
		assert.NotNil(t, s.router.MethodNotAllowedHandler)
		slices.Sort(inRouter)
		assert.Equal(t, inDoc, slices.Compact(inRouter), "BASE_PATH %q", base)
	}
}

// The operations the document leaves open are exactly those the agent
// serves without a token.
func TestOpenAPISecurityMatchesAuth(t *testing.T) {
	d, err := loadOpenAPIDoc()
	require.NoError(t, err)
	ts, _ := newTestServer(t, testServer{})
	for path, item := range d.doc.Paths.Map() {
		for method, op := range item.Operations() {
			open := op.Security != nil && len(*op.Security) == 0
			req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, nil)
			require.NoError(t, err)
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if open {
				assert.Equal(t, http.StatusOK, resp.StatusCode, "%s %s is open in the document", method, path)
			} else {
				assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s needs a token in the document", method, path)
			}
		}
	}
}

// GET /openapi.yaml serves the document, without a token, under BASE_PATH
// too.
func TestOpenAPIServed(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BasePath: "/base"}, runner: &executor.Runner{}})
	for _, path := range []string{"/openapi.yaml", "/base/openapi.yaml"} {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, "application/yaml", resp.Header.Get("Content-Type"), path)
		assert.Equal(t, sandboxexecutor.OpenAPI(), string(body), path)
		doc, err := openapi3.NewLoader().LoadFromData(body)
		require.NoError(t, err, path)
		assert.Equal(t, "3.1.0", doc.OpenAPI)
	}
}

// checkOnce sends one request through a docChecker in front of h, and
// returns what the checker found. token "" sends no Authorization header.
func checkOnce(t *testing.T, h http.HandlerFunc, method, path, token, body string) []string {
	t.Helper()
	c := newDocChecker(t, "", testSecret, h)
	ts := httptest.NewServer(c)
	defer ts.Close()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ts.Close() // waits for the handler, and so for the check
	return c.errors()
}

// replyJSON is a fake handler that reads the request to its end, as the
// agent does, and replies with body.
func replyJSON(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// replyStream is a fake handler that answers an event stream made of
// events, written one by one.
func replyStream(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			_ = http.NewResponseController(w).Flush()
		}
	}
}

// The checker fails what does not match the document: a renamed field
// (the reason it exists), a wrong type or status, an event the document
// does not list, and the rest. The valid cases show it fails nothing else.
func TestOpenAPICheckCatchesMismatches(t *testing.T) {
	const (
		runOK       = `{"stdout":"hi\n","stderr":"","code":0}`
		output      = "event: output\ndata: {\"stream\":\"stdout\",\"data\":\"x\"}\n\n"
		complete    = "event: complete\ndata: {\"code\":0,\"error\":false}\n\n"
		logLine     = "id: 1\nevent: log\ndata: {\"timestamp\":\"2025-11-04T12:34:56.5Z\",\"stream\":\"stdout\",\"data\":\"x\"}\n\n"
		logsDone    = "event: complete\ndata: {\"message\":\"stream ended\"}\n\n"
		appJSON     = "application/json"
		run, stream = "/run", "/run_streaming"
	)
	tests := []struct {
		name, method, path, token, body string
		h                               http.HandlerFunc
		want                            string // in the finding; "" for none
	}{
		{"valid reply", "POST", run, testSecret, `{"cmd":"echo hi"}`, replyJSON(200, appJSON, runOK), ""},
		{"renamed field", "POST", run, testSecret, `{"cmd":"echo hi"}`, replyJSON(200, appJSON, `{"stdouts":"hi\n","stderr":"","code":0}`), "stdout"},
		{"number as a string", "POST", run, testSecret, `{"cmd":"true"}`, replyJSON(200, appJSON, `{"stdout":"","stderr":"","code":"0"}`), "code"},
		{"status not in the document", "POST", run, testSecret, `{"cmd":"true"}`, replyJSON(http.StatusTeapot, appJSON, `{"error":"no"}`), "status is not supported"},
		{"error with an undocumented field", "POST", run, testSecret, `{}`, replyJSON(400, appJSON, `{"error":"cmd is required","field":"cmd"}`), "field"},
		{"reply not labelled JSON", "POST", run, testSecret, `{"cmd":"true"}`, replyJSON(200, "text/plain", runOK), "Content-Type"},
		{"valid error", "POST", run, testSecret, `{"cmd":5}`, replyJSON(400, appJSON, `{"error":"invalid request: field \"cmd\" must be a string"}`), ""},
		{"rejected request accepted", "POST", run, testSecret, `{"cmd":5}`, replyJSON(200, appJSON, runOK), "rejects the request"},
		{"renamed request field accepted", "POST", run, testSecret, `{"command":"true"}`, replyJSON(200, appJSON, runOK), "rejects the request"},
		{"no token, accepted", "POST", run, "", `{"cmd":"true"}`, replyJSON(200, appJSON, runOK), "rejects the request"},
		{"no token, 401 without WWW-Authenticate", "POST", run, "", `{"cmd":"true"}`, replyJSON(401, appJSON, `{"error":"unauthorized"}`), "WWW-Authenticate"},
		{"unknown path, 404", "GET", "/nope", testSecret, "", replyJSON(404, appJSON, `{"error":"no such endpoint: /nope"}`), ""},
		{"unknown path, 200", "GET", "/nope", testSecret, "", replyJSON(200, appJSON, `{}`), "not an operation"},
		{"unknown path, bare 404", "GET", "/nope", testSecret, "", replyJSON(404, "text/plain", "404 page not found"), "Content-Type"},
		{"valid stream", "POST", stream, testSecret, `{"cmd":"echo x"}`, replyStream(output, ": ping\n\n", complete), ""},
		{"unknown event", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream("event: progress\ndata: {}\n\n", complete), `event "progress"`},
		{"renamed event field", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream("event: output\ndata: {\"streams\":\"stdout\",\"data\":\"x\"}\n\n"), "streams"},
		{"event of another stream", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream(logsDone), "code"},
		{"data on two lines", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream("event: output\ndata: {\"stream\":\"stdout\",\ndata: \"data\":\"x\"}\n\n"), "several data"},
		{"event without a name", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream("data: {\"code\":0,\"error\":false}\n\n"), "without an event"},
		{"id where none belongs", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream("id: 1\n" + output), "id: line"},
		{"unfinished event", "POST", stream, testSecret, `{"cmd":"true"}`, replyStream(strings.TrimSuffix(complete, "\n")), "inside an event"},
		{"valid log stream", "GET", "/process_logs_streaming?id=x", testSecret, "", replyStream(logLine, logsDone), ""},
		{"log without its id", "GET", "/process_logs_streaming?id=x", testSecret, "", replyStream(strings.TrimPrefix(logLine, "id: 1\n")), "id: line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := checkOnce(t, tt.h, tt.method, tt.path, tt.token, tt.body)
			if tt.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs, "the checker missed it")
			assert.Contains(t, strings.Join(errs, "\n"), tt.want)
		})
	}
}

// The checker passes an event stream on as it is written, and lets
// http.ResponseController reach the connection: the client sees the first
// event while the handler still runs.
func TestOpenAPICheckStreamsLive(t *testing.T) {
	release := make(chan struct{})
	rcErrs := make(chan error, 2)
	h := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rcErrs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
		_, _ = io.WriteString(w, "event: output\ndata: {\"stream\":\"stdout\",\"data\":\"first\"}\n\n")
		rcErrs <- rc.Flush()
		<-release
		_, _ = io.WriteString(w, "event: complete\ndata: {\"code\":0,\"error\":false}\n\n")
	}
	c := newDocChecker(t, "", testSecret, http.HandlerFunc(h))
	ts := httptest.NewServer(c)
	defer ts.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	resp := request(t, ts, "POST", "/run_streaming", map[string]string{"cmd": "echo first"})
	require.NoError(t, <-rcErrs, "SetWriteDeadline through the checker")
	require.NoError(t, <-rcErrs, "Flush through the checker")
	r := sse.NewReader(resp.Body)
	ev, err := r.Next() // blocks until the test ends if the checker held the stream back
	require.NoError(t, err)
	assert.Equal(t, "output", string(ev.Name))
	close(release)
	ev, err = r.Next()
	require.NoError(t, err)
	assert.Equal(t, "complete", string(ev.Name))
	resp.Body.Close()
	ts.Close()
	assert.Empty(t, c.errors())
}

// A jsonSkeleton keeps JSON valid and of the same shape, whatever the
// pieces it is written in, with long strings cut.
func TestJSONSkeleton(t *testing.T) {
	long := strings.Repeat("é\\\"x\\u00e9", maxKeptString) // escapes and UTF-8 throughout
	in, err := json.Marshal(map[string]any{"short": "a\"b\\c\u2028", "long": long, "n": 1.5, "list": []any{"x", true, nil}})
	require.NoError(t, err)
	for _, piece := range []int{1, 3, 7, 4096, len(in)} {
		var s jsonSkeleton
		for b := in; len(b) > 0; b = b[min(piece, len(b)):] {
			s.Write(b[:min(piece, len(b))])
		}
		require.False(t, s.overflow)
		var got map[string]any
		require.NoError(t, json.Unmarshal(s.buf, &got), "piece %d: %q", piece, s.buf[:min(200, len(s.buf))])
		gotLong := got["long"].(string)
		assert.True(t, strings.HasPrefix(long, gotLong), "piece %d", piece)
		assert.LessOrEqual(t, len(gotLong), maxKeptString+6, "piece %d", piece) // six: the longest escape, \u00e9
		assert.Greater(t, len(gotLong), maxKeptString/2, "piece %d", piece)
		delete(got, "long")
		assert.Equal(t, map[string]any{"short": "a\"b\\c\u2028", "n": 1.5, "list": []any{"x", true, nil}}, got, "piece %d", piece)
	}
}

// CONNECT, which OpenAPI cannot have as an operation, is in the document's
// x-connect extension: its target forms and every status its handler
// answers. (The checker judges every CONNECT of the tests against it.)
func TestOpenAPIConnectDocumented(t *testing.T) {
	d, err := loadOpenAPIDoc()
	require.NoError(t, err)
	xc, ok := d.doc.Extensions["x-connect"].(map[string]any)
	require.True(t, ok, "x-connect")
	assert.ElementsMatch(t, []any{"127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "/tunnel/{port}"}, xc["targets"])
	responses, _ := xc["responses"].(map[string]any)
	for _, code := range []string{"200", "400", "403", "407", "414", "500", "502", "503", "504"} {
		assert.Contains(t, responses, code)
	}
	assert.Contains(t, d.doc.Info.Description, "CONNECT", "the description explains it")
}
