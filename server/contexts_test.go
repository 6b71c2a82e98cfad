package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// codeEvent is one event of a /run_code stream.
type codeEvent struct {
	name string
	data map[string]any
	at   time.Time
}

func newContextServer(t *testing.T, opts contexts.Options) *httptest.Server {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH:", err)
	}
	ts, _ := newTestServer(t, testServer{contexts: opts})
	return ts
}

// createContext creates a context and returns its id.
func createContext(t *testing.T, ts *httptest.Server, body map[string]any) string {
	t.Helper()
	resp := request(t, ts, http.MethodPost, "/create_context", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var out struct {
		ID         string `json:"id"`
		Generation int    `json:"generation"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, 1, out.Generation)
	return out.ID
}

// runCode runs a call and returns its events, the last complete.
func runCode(t *testing.T, ts *httptest.Server, body map[string]any) []codeEvent {
	t.Helper()
	resp := request(t, ts, http.MethodPost, "/run_code", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("run_code: %d %s", resp.StatusCode, b)
	}
	return readCodeEvents(t, resp.Body)
}

func readCodeEvents(t *testing.T, body io.Reader) []codeEvent {
	t.Helper()
	rd := sse.NewReader(body)
	var evs []codeEvent
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		require.NoError(t, err)
		var data map[string]any
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		evs = append(evs, codeEvent{name: string(ev.Name), data: data, at: time.Now()})
	}
}

func complete(t *testing.T, evs []codeEvent) map[string]any {
	t.Helper()
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	require.Equal(t, "complete", last.name)
	return last.data
}

func streamText(evs []codeEvent, name string) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.name == name {
			b.WriteString(ev.data["data"].(string))
		}
	}
	return b.String()
}

func resultText(evs []codeEvent) (string, bool) {
	for _, ev := range evs {
		if ev.name == "result" {
			return ev.data["data"].(map[string]any)["text/plain"].(string), true
		}
	}
	return "", false
}

func findEvent(evs []codeEvent, name string) (codeEvent, bool) {
	for _, ev := range evs {
		if ev.name == name {
			return ev, true
		}
	}
	return codeEvent{}, false
}

func TestContextState(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})

	evs := runCode(t, ts, map[string]any{"context": id, "code": "x = 41\nimport os; os.chdir('/tmp')"})
	assert.Equal(t, "ok", complete(t, evs)["status"])
	_, has := resultText(evs)
	assert.False(t, has, "an assignment has no result")

	evs = runCode(t, ts, map[string]any{"context": id, "code": "x + 1"})
	res, _ := resultText(evs)
	assert.Equal(t, "42", res)
	evs = runCode(t, ts, map[string]any{"context": id, "code": "os.getcwd()"})
	res, _ = resultText(evs)
	assert.Equal(t, "'/tmp'", res)

	evs = runCode(t, ts, map[string]any{"context": id, "code": "def f():\n    return 1/0\nf()"})
	c := complete(t, evs)
	assert.Equal(t, "error", c["status"])
	assert.Equal(t, false, c["state_lost"])
	errEv, ok := findEvent(evs, "error")
	require.True(t, ok)
	assert.Equal(t, "ZeroDivisionError", errEv.data["name"])
	tb := fmt.Sprint(errEv.data["traceback"])
	assert.Contains(t, tb, "in f")
	assert.Contains(t, tb, "return 1/0")

	evs = runCode(t, ts, map[string]any{"context": id, "code": "print(x)"})
	assert.Equal(t, "41\n", streamText(evs, "stdout"))
	c = complete(t, evs)
	assert.Equal(t, float64(5), c["execution_count"])
	assert.Equal(t, float64(1), c["generation"])

	resp := request(t, ts, http.MethodGet, "/context_status?id="+id, nil)
	st := jsonReply(t, resp)
	assert.Equal(t, "ok", st["last_status"])
	assert.Equal(t, float64(5), st["execution_count"])
	assert.Equal(t, false, st["busy"])
}

// The first output of a call arrives while the code still runs, not at
// its end, and whatever the context's env says of buffering.
func TestContextOutputIsLive(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python", "env": map[string]string{"PYTHONUNBUFFERED": ""}})
	start := time.Now()
	evs := runCode(t, ts, map[string]any{"context": id, "code": "import time\nprint('a', end='')\ntime.sleep(3)"})
	require.NotEmpty(t, evs)
	assert.Equal(t, "stdout", evs[0].name)
	assert.Equal(t, "a", evs[0].data["data"])
	assert.Less(t, evs[0].at.Sub(start), 500*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), 3*time.Second)
}

// Nothing the code prints, frames included, is taken for a frame.
// queuedCalls is how many /run_code calls wait behind the running one,
// read from the requests in flight: the metrics request itself and the
// running call are the other two.
func TestContextErrors(t *testing.T) {
	ts := newContextServer(t, contexts.Options{MaxContexts: 1})
	for _, tc := range []struct {
		method, path string
		body         any
		code         int
		msg          string
	}{
		{http.MethodPost, "/run_code", map[string]any{"context": "nope", "code": "1"}, 404, "no such context"},
		{http.MethodPost, "/interrupt_context", map[string]any{"id": "nope"}, 404, "no such context"},
		{http.MethodPost, "/delete_context", map[string]any{"id": "nope"}, 404, "no such context"},
		{http.MethodGet, "/context_status?id=nope", nil, 404, "no such context"},
		{http.MethodPost, "/run_code", map[string]any{"code": "1"}, 400, "language is required"},
		{http.MethodPost, "/create_context", map[string]any{"language": "cobol"}, 400, `language must be "python" or "javascript"`},
		{http.MethodPost, "/run_code", map[string]any{"language": "python", "code": "1", "timeout": 0}, 400, "timeout must be a number of seconds greater than 0"},
	} {
		resp := request(t, ts, tc.method, tc.path, tc.body)
		body := jsonReply(t, resp)
		assert.Equal(t, tc.code, resp.StatusCode, tc.path)
		assert.Equal(t, tc.msg, body["error"], tc.path)
	}
	id := createContext(t, ts, map[string]any{"language": "python"})
	resp := request(t, ts, http.MethodPost, "/create_context", map[string]any{"language": "python"})
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "too many contexts (limit 1)", jsonReply(t, resp)["error"])
	// A stateless run counts too.
	resp = request(t, ts, http.MethodPost, "/run_code", map[string]any{"language": "python", "code": "1"})
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp.Body.Close()
	assert.Equal(t, true, jsonReply(t, request(t, ts, http.MethodPost, "/delete_context", map[string]any{"id": id}))["deleted"])
	evs := runCode(t, ts, map[string]any{"language": "python", "code": "6*7"})
	res, _ := resultText(evs)
	assert.Equal(t, "42", res)
	require.Eventually(t, func() bool { // the stateless run's slot is free once it is gone
		resp := request(t, ts, http.MethodPost, "/create_context", map[string]any{"language": "python"})
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusCreated
	}, 5*time.Second, 20*time.Millisecond)
}

func TestContextNoInterpreter(t *testing.T) {
	ts := newContextServer(t, contexts.Options{LookPath: func(name string) (string, error) {
		return "", errors.New("not found")
	}})
	resp := request(t, ts, http.MethodPost, "/create_context", map[string]any{"language": "python"})
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode)
	assert.Equal(t, "python3 not found on PATH", jsonReply(t, resp)["error"])
	resp = request(t, ts, http.MethodPost, "/run_code", map[string]any{"language": "python", "code": "1"})
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode)
	assert.Equal(t, "python3 not found on PATH", jsonReply(t, resp)["error"])
}

// A client that leaves mid-call does not stop the code; the end of its
// output is kept for context_status.
func TestContextClientLeaves(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	ctx, cancel := contextWithCancel(t)
	body := `{"context": "` + id + `", "code": "import time\nprint('start', flush=True)\ntime.sleep(1)\nprint('end')\ny = 5"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/run_code", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	ev, err := sse.NewReader(resp.Body).Next()
	require.NoError(t, err)
	assert.Equal(t, "stdout", string(ev.Name))
	cancel()
	resp.Body.Close()
	var st map[string]any
	require.Eventually(t, func() bool {
		st = jsonReply(t, request(t, ts, http.MethodGet, "/context_status?id="+id, nil))
		return st["busy"] == false
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, "ok", st["last_status"])
	assert.Equal(t, "start\nend\n", st["last_output"])
	res, _ := resultText(runCode(t, ts, map[string]any{"context": id, "code": "y"}))
	assert.Equal(t, "5", res, "the code ran to its end")
}

func TestContextIdleTimeoutAndDelete(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	idle := createContext(t, ts, map[string]any{"language": "python", "idle_timeout": 1})
	kept := createContext(t, ts, map[string]any{"language": "python"})
	require.Eventually(t, func() bool {
		resp := request(t, ts, http.MethodGet, "/context_status?id="+idle, nil)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	}, 10*time.Second, 100*time.Millisecond)

	// Deleting a context ends its running call and kills its group.
	done := make(chan []codeEvent, 1)
	go func() {
		resp := request(t, ts, http.MethodPost, "/run_code", map[string]any{"context": kept, "code": "import subprocess\nsubprocess.run(['sleep', '100'])"})
		defer resp.Body.Close()
		done <- readCodeEvents(t, resp.Body)
	}()
	require.Eventually(t, func() bool {
		return jsonReply(t, request(t, ts, http.MethodGet, "/context_status?id="+kept, nil))["busy"] == true
	}, 10*time.Second, 20*time.Millisecond)
	list := jsonReply(t, request(t, ts, http.MethodGet, "/list_contexts", nil))["contexts"].([]any)
	require.Len(t, list, 1)
	pid := int(list[0].(map[string]any)["pid"].(float64))
	assert.Equal(t, true, jsonReply(t, request(t, ts, http.MethodPost, "/delete_context", map[string]any{"id": kept}))["deleted"])
	c := complete(t, <-done)
	assert.Equal(t, "interrupted", c["status"])
	assert.Equal(t, true, c["state_lost"])
	// Its members are killed; init reaps the orphans' zombies in its own time.
	assert.Eventually(t, func() bool { return syscall.Kill(-pid, 0) != nil }, 5*time.Second, 20*time.Millisecond,
		"the interpreter's process group is gone")
}

// A session's context starts from the session's cwd and environment, and
// dies with the session.
func TestContextInSession(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	resp := request(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "nb", "workdir": "temp"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp.Body.Close()
	out := jsonReply(t, request(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "mkdir -p app && cd app && export STAGE=test && pwd", "session": "nb"}))
	dir := strings.TrimSpace(out["stdout"].(string))
	id := createContext(t, ts, map[string]any{"language": "python", "session": "nb"})
	res, _ := resultText(runCode(t, ts, map[string]any{"context": id, "code": "import os\n(os.getcwd(), os.environ['STAGE'])"}))
	assert.Equal(t, "('"+dir+"', 'test')", res)

	resp = request(t, ts, http.MethodPost, "/delete_session", map[string]any{"id": "nb"})
	resp.Body.Close()
	require.Eventually(t, func() bool {
		resp := request(t, ts, http.MethodGet, "/context_status?id="+id, nil)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	}, 10*time.Second, 100*time.Millisecond)

	resp = request(t, ts, http.MethodPost, "/create_context", map[string]any{"language": "python", "session": "gone"})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "session not found: gone", jsonReply(t, resp)["error"])
}

// Frames sent from the code's own threads are whole: display() from
// several threads at once breaks nothing.
func TestContextDisplayFromThreads(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	code := `import threading
def show(i):
    for j in range(50):
        display("t%d-%d" % (i, j) + "x" * 5000)
ts = [threading.Thread(target=show, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()`
	evs := runCode(t, ts, map[string]any{"context": id, "code": code})
	c := complete(t, evs)
	assert.Equal(t, "ok", c["status"])
	assert.Equal(t, false, c["state_lost"])
	n := 0
	for _, ev := range evs {
		if ev.name == "display" {
			n++
		}
	}
	assert.Equal(t, 200, n)
}

// A done frame the code forges on the worker's own frame pipe, for
// another call, is taken for what it is: the interpreter is restarted and
// the call says the state is lost, rather than ending early as if fine.
func TestContextInvalidUTF8(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": `import os; os.write(1, b"a\xffb\xe2\x82"); os.write(1, b"\xac\n")`})
	assert.Equal(t, "a\uFFFDb€\n", streamText(evs, "stdout"))
}

// A rich output comes after all the output written before it, though
// they travel on different pipes. (Output written after it may overtake
// it: the worker does not wait for the agent.)
func TestContextEventOrder(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": "for i in range(30):\n    print('p%d' % i)\n    display('d%d' % i)\n'end'"})
	seen := map[string]bool{}
	for _, ev := range evs {
		switch ev.name {
		case "stdout":
			for _, line := range strings.Fields(ev.data["data"].(string)) {
				seen[line] = true
			}
		case "display", "result":
			text := strings.Trim(ev.data["data"].(map[string]any)["text/plain"].(string), "'")
			if n, ok := strings.CutPrefix(text, "d"); ok {
				assert.True(t, seen["p"+n], "%s before p%s", text, n)
			} else {
				assert.Len(t, seen, 30, "the result after every line")
			}
		}
	}
}

// Output written around the worker's own streams, by os.write on fd 1 or
// by a child process, is all delivered before the call's complete: the
// end of a call waits for what its pipes held when the code ended.
func TestContextRawOutputBeforeComplete(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	for range 5 {
		evs := runCode(t, ts, map[string]any{"context": id,
			"code": `import os, subprocess; os.write(1, b"x" * 300000); subprocess.run(["head", "-c", "200000", "/dev/zero"])`})
		assert.Equal(t, 500000, len(streamText(evs, "stdout")), "bytes before complete")
		assert.Equal(t, "complete", evs[len(evs)-1].name)
	}
}
