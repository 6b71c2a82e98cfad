package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// event is a parsed SSE event with its data decoded.
type event struct {
	ID   string
	Name string
	Data map[string]any
	Raw  string
}

// stream opens an event stream and returns a function that reads the next
// event (io.EOF at the end).
func stream(t *testing.T, ts *httptest.Server, method, path string, body any) (*http.Response, func() (event, error)) {
	t.Helper()
	resp := request(t, ts, method, path, body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := sse.NewReader(resp.Body)
	return resp, func() (event, error) {
		ev, err := r.Next()
		if err != nil {
			return event{}, err
		}
		e := event{ID: string(ev.ID), Name: string(ev.Name), Raw: string(ev.Data)}
		if strings.Contains(e.Raw, "\n") {
			return e, fmt.Errorf("data spans lines: %q", e.Raw)
		}
		return e, json.Unmarshal(ev.Data, &e.Data)
	}
}

// readAll reads events to the end of the stream.
func readAll(t *testing.T, next func() (event, error)) []event {
	t.Helper()
	var evs []event
	for {
		ev, err := next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		require.NoError(t, err)
		evs = append(evs, ev)
	}
}

func TestRun(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	tests := []struct {
		name string
		req  map[string]any
		want map[string]any
	}{
		{"echo", map[string]any{"cmd": "echo 'Hello World'"}, map[string]any{"stdout": "Hello World\n", "stderr": "", "code": 0.0}},
		{"fail", map[string]any{"cmd": "echo oops >&2; exit 2"}, map[string]any{"stdout": "", "stderr": "oops\n", "code": 2.0, "error": "Non-zero exit code"}},
		{"cwd and env", map[string]any{"cmd": "pwd; echo $DEBUG", "cwd": dir, "env": map[string]string{"DEBUG": "true"}},
			map[string]any{"stdout": dir + "\ntrue\n", "stderr": "", "code": 0.0}},
		{"timeout", map[string]any{"cmd": "echo before; sleep 30", "timeout": 0.3},
			map[string]any{"stdout": "before\n", "stderr": "", "code": 124.0, "error": "command timed out after 300ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, ts, "POST", "/run", tt.req)
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, tt.want, body)
		})
	}
}

func TestRunOutputEdgeCases(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	// More than a pipe's worth of stderr must not deadlock.
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "head -c 200000 /dev/zero | tr '\\0' e >&2; echo ok"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body["stdout"])
	assert.Len(t, body["stderr"], 200000)

	// Invalid UTF-8 still gives valid JSON.
	resp := request(t, ts, "POST", "/run", map[string]any{"cmd": "printf 'a\\377b'"})
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, json.Valid(raw))
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	assert.True(t, utf8.ValidString(out["stdout"].(string)))
	assert.Equal(t, "a\ufffdb", out["stdout"])
}

func TestRunClientLeavingKillsGroup(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	pidFile := t.TempDir() + "/pid"
	ctx, cancel := contextWithCancel(t)
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/run",
		strings.NewReader(fmt.Sprintf(`{"cmd":"sleep 100 & echo $! > %s; wait"}`, pidFile)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	pid := waitPidFile(t, pidFile)
	cancel()
	require.Error(t, <-errc)
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "grandchild %d survived", pid)
}

func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)
	return pid
}

func TestRunStreaming(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	resp, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "for i in 1 2 3; do echo $i; done; echo err >&2; exit 3"})
	assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	evs := readAll(t, next)
	require.NotEmpty(t, evs)
	var stdout []any
	var stderr []any
	for _, ev := range evs[:len(evs)-1] {
		require.Equal(t, "output", ev.Name)
		assert.Empty(t, ev.ID)
		assert.Len(t, ev.Data, 2, "output events carry exactly stream and data")
		if ev.Data["stream"] == "stdout" {
			stdout = append(stdout, ev.Data["data"])
		} else {
			stderr = append(stderr, ev.Data["data"])
		}
	}
	assert.Equal(t, []any{"1", "2", "3"}, stdout)
	assert.Equal(t, []any{"err"}, stderr)
	last := evs[len(evs)-1]
	assert.Equal(t, "complete", last.Name)
	assert.Equal(t, `{"code":3,"error":true}`, last.Raw)
}

func TestRunStreamingSuccessAndTimeout(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	_, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "printf 'no newline'"})
	evs := readAll(t, next)
	require.Len(t, evs, 2)
	assert.Equal(t, `{"stream":"stdout","data":"no newline"}`, evs[0].Raw)
	assert.Equal(t, `{"code":0,"error":false}`, evs[1].Raw)

	_, next = stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "echo before; sleep 30", "timeout": 0.2})
	evs = readAll(t, next)
	require.Len(t, evs, 2)
	assert.Equal(t, "before", evs[0].Data["data"])
	assert.Equal(t, "complete", evs[1].Name)
	assert.Equal(t, 124.0, evs[1].Data["code"])
	assert.Equal(t, true, evs[1].Data["error"])
	assert.Contains(t, evs[1].Data["message"], "timed out")
}

func TestRunStreamingStartFailureIsErrorEvent(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{Shell: "/no/such/shell"}})
	_, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "true"})
	evs := readAll(t, next)
	require.Len(t, evs, 1)
	assert.Equal(t, "error", evs[0].Name)
	assert.Contains(t, evs[0].Data["error"], "failed to start command")
	assert.NotContains(t, evs[0].Data, "code", "a client that classifies by keys must not see an exit code")
}

func TestRunStreamingLongLineAndKeepAlive(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{KeepAlive: 100 * time.Millisecond}, runner: &executor.Runner{}})
	resp := request(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "head -c 2000000 /dev/zero | tr '\\0' x; echo; sleep 0.5; echo end", "keepalive": true})
	r := sse.NewReader(resp.Body)
	total, pieces := 0, 0
	var names []string
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, string(ev.Name))
		var d map[string]any
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if s, ok := d["data"].(string); ok && strings.HasPrefix(s, "x") {
			total += len(s)
			pieces++
		}
	}
	assert.Equal(t, 2000000, total)
	assert.Greater(t, pieces, 1, "a 2 MB line comes in pieces")
	assert.Equal(t, "complete", names[len(names)-1])
	assert.Positive(t, r.Comments, "an idle stream that asked for them gets ping comments")
}

func TestRunStreamingClientLeavingKillsGroup(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	ctx, cancel := contextWithCancel(t)
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/run_streaming", strings.NewReader(`{"cmd":"sleep 100 & echo $!; wait"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	ev, err := r.Next()
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	pid, err := strconv.Atoi(d["data"].(string))
	require.NoError(t, err)
	require.True(t, testutil.Alive(pid))
	cancel()
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "grandchild %d survived", pid)
	_ = syscall.Kill(pid, 0)
}
