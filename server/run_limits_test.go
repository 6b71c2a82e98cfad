package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// oldRunReply is the /run reply as encoding/json wrote it before it was
// streamed, less the escaping of '<', '>' and '&'.
func oldRunReply(t *testing.T, out executor.Output, msg string) []byte {
	t.Helper()
	type reply struct {
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		Error     string `json:"error,omitempty"`
		Code      int    `json:"code"`
		Truncated bool   `json:"truncated,omitempty"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(reply{string(out.Stdout), string(out.Stderr), msg, out.Code, out.Truncated}))
	return b.Bytes()
}

// The streamed /run reply is byte for byte what encoding/json wrote, for
// small and large output alike.
func TestRunReplyMatchesEncodingJSON(t *testing.T) {
	awkward := "plain \"quoted\" back\\slash\ttab\r\nnew line \x00\x01\x1f \u2028\u2029 é€😀 \xff\xfe bad \xe2\x82 cut <&>"
	for _, tt := range []struct {
		name string
		out  executor.Output
		msg  string
	}{
		{"empty", executor.Output{}, ""},
		{"ordinary", executor.Output{Stdout: []byte("hello\n"), Stderr: []byte("warn\n")}, ""},
		{"error and code", executor.Output{Result: executor.Result{Code: 2}, Stderr: []byte("oops\n")}, "Non-zero exit code"},
		{"truncated", executor.Output{Result: executor.Result{Truncated: true}, Stdout: []byte("x")}, ""},
		{"awkward", executor.Output{Stdout: []byte(awkward), Stderr: []byte(awkward)}, "command timed out after 1s"},
		{"large", executor.Output{Stdout: []byte(strings.Repeat(awkward, 3000)), Stderr: []byte(strings.Repeat("e", 100000))}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, writeRunReply(&b, &tt.out, tt.msg, "", nil))
			assert.Equal(t, string(oldRunReply(t, tt.out, tt.msg)), b.String())
			assert.True(t, json.Valid(b.Bytes()))
		})
	}
}

// maxWriter is a ResponseWriter that keeps only the size of the largest
// write and a copy of everything, for checking.
type maxWriter struct {
	h        http.Header
	status   int
	largest  int
	body     bytes.Buffer
	keepBody bool
}

func (w *maxWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *maxWriter) WriteHeader(code int) { w.status = code }
func (w *maxWriter) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	if w.keepBody {
		w.body.Write(p)
	}
	return len(p), nil
}

// A /run reply is written in bounded pieces, never built whole: 1 MiB of
// NUL bytes escapes to 6 MiB of JSON, which before went out in one write
// built in memory (32 such replies at once took 4.96 GB).
func TestRunReplyIsWrittenInBoundedPieces(t *testing.T) {
	_, s := newTestServer(t, testServer{runner: &executor.Runner{MaxOutput: 2 << 20}})
	w := &maxWriter{keepBody: true}
	r := httptest.NewRequest("POST", "/run", strings.NewReader(`{"cmd":"head -c 1048576 /dev/zero; echo err >&2"}`))
	require.NoError(t, s.handleRun(w, r))
	assert.Equal(t, http.StatusOK, w.status)
	assert.Equal(t, "application/json", w.h.Get("Content-Type"))
	assert.LessOrEqual(t, w.largest, 64<<10, "a write larger than sse.JSONString's buffer")
	var got map[string]any
	require.NoError(t, json.Unmarshal(w.body.Bytes(), &got))
	assert.Equal(t, map[string]any{"stdout": strings.Repeat("\x00", 1<<20), "stderr": "err\n", "code": 0.0}, got)
}

// Writing a reply allocates a bounded amount, whatever the output's size:
// here 8 MiB of NUL bytes, 48 MiB of JSON.
func TestRunReplyMemoryIsBounded(t *testing.T) {
	out := executor.Output{Stdout: make([]byte, 4<<20), Stderr: make([]byte, 4<<20)}
	w := &maxWriter{}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	require.NoError(t, writeRunReply(w, &out, "", "", nil))
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(512<<10))
	assert.LessOrEqual(t, w.largest, 64<<10)
}

// A background child that writes forever is cut, and the reply says so.
func TestRunAndStreamingReportTruncated(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{DrainDelay: 100 * time.Millisecond}})
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "yes >&2 & echo hi"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hi\n", body["stdout"])
	assert.Equal(t, true, body["truncated"])
	assert.Equal(t, 0.0, body["code"])

	_, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "yes >&2 & echo hi"})
	var last event
	for {
		ev, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		last = ev
	}
	assert.Equal(t, "complete", last.Name)
	assert.Equal(t, `{"code":0,"error":false,"truncated":true}`, last.Raw)
}

// streamComments runs a /run_streaming request with the given body and
// extra header, reads it to the end and returns how many comment lines
// (pings) it carried.
func streamComments(t *testing.T, url, body, accept string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/run_streaming", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := sse.NewReader(resp.Body)
	names := []string{}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, string(ev.Name))
	}
	require.Equal(t, []string{"output", "complete"}, names)
	return r.Comments
}

// Pings on /run_streaming are sent only to a client that asks for them:
// the Python SDK's timeout means "no bytes for N seconds", which pings
// would defeat.
func TestRunStreamingPingsOnlyWhenAsked(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{KeepAlive: 50 * time.Millisecond}, runner: &executor.Runner{}})
	const cmd = `"cmd":"sleep 0.5; echo end"`
	assert.Zero(t, streamComments(t, ts.URL, `{`+cmd+`}`, ""), "pings nobody asked for")
	assert.Zero(t, streamComments(t, ts.URL, `{`+cmd+`,"keepalive":false}`, "application/json"), "pings nobody asked for")
	assert.Positive(t, streamComments(t, ts.URL, `{`+cmd+`,"keepalive":true}`, ""), "keepalive")
	assert.Positive(t, streamComments(t, ts.URL, `{`+cmd+`}`, "text/event-stream"), "Accept")
	assert.Positive(t, streamComments(t, ts.URL, `{`+cmd+`,"timeout":30}`, ""), "timeout")
}

// Requests execve would refuse, and timeouts too small to mean anything,
// are the client's fault: 400 naming the problem, on both endpoints.
func TestOversizedAndTinyRequestsAre400(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	big := strings.Repeat("x", 128<<10)
	manyEnv := map[string]string{}
	for i := range 60 {
		manyEnv["E"+string(rune('A'+i%26))+strings.Repeat("x", i)] = big[:120<<10]
	}
	for _, tt := range []struct {
		name string
		req  map[string]any
		want string
	}{
		{"cmd over one argument's limit", map[string]any{"cmd": "true #" + big}, "limit"},
		{"env entry over the limit", map[string]any{"cmd": "true", "env": map[string]string{"BIG": big}}, "BIG"},
		{"all together over the limit", map[string]any{"cmd": "true", "env": manyEnv}, "E2BIG"},
		{"timeout below a microsecond", map[string]any{"cmd": "true", "timeout": 1e-7}, "microsecond"},
	} {
		for _, path := range []string{"/run", "/run_streaming"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				code, body := call(t, ts, "POST", path, tt.req)
				assert.Equal(t, http.StatusBadRequest, code)
				assert.Contains(t, body["error"], tt.want)
			})
		}
	}
	// One microsecond is a timeout, if a short one.
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "sleep 10", "timeout": 1e-6})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, 124.0, body["code"])
}

// Past Runner.MaxRunning, commands are refused with 503 and a JSON error,
// on /run and /run_streaming alike, until one ends.
func TestTooManyCommandsIs503(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{MaxRunning: 1}})
	ctx, cancel := contextWithCancel(t)
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/run_streaming", strings.NewReader(`{"cmd":"echo started; sleep 100"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = sse.NewReader(resp.Body).Next() // it runs
	require.NoError(t, err)

	for _, path := range []string{"/run", "/run_streaming"} {
		code, body := call(t, ts, "POST", path, map[string]any{"cmd": "true"})
		assert.Equal(t, http.StatusServiceUnavailable, code, path)
		assert.Contains(t, body["error"], "too many commands running", path)
	}

	cancel() // the first client leaves: its command is killed and its slot freed
	require.Eventually(t, func() bool {
		code, _ := call(t, ts, "POST", "/run", map[string]any{"cmd": "true"})
		return code == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
}
