package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/procs"
)

// poll sends /poll_process and returns the status and the reply.
func poll(t *testing.T, ts *httptest.Server, body map[string]any) (int, map[string]any) {
	t.Helper()
	return call(t, ts, "POST", "/poll_process", body)
}

// TestRunYieldThenPoll is the first case: a command that outlives
// yield_ms comes back as a handle, and a poll returns its end within its
// yield of the exit.
func TestRunYieldThenPoll(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	start := time.Now()
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "echo started; sleep 2; echo done", "yield_ms": 200})
	require.Equal(t, http.StatusOK, code, body)
	assert.Less(t, time.Since(start), 1500*time.Millisecond, "the reply came at yield_ms, not at the end")
	assert.Equal(t, "running", body["status"])
	assert.Equal(t, "started\n", body["stdout"])
	assert.Equal(t, 8.0, body["cursor"])
	id := body["id"].(string)

	// The process is listed, as any background process.
	_, list := call(t, ts, "GET", "/list_processes", nil)
	found := false
	for _, p := range list["processes"].([]any) {
		found = found || p.(map[string]any)["id"] == id
	}
	assert.True(t, found, "%s not listed", id)

	code, body = poll(t, ts, map[string]any{"id": id, "yield_ms": 10000})
	require.Equal(t, http.StatusOK, code, body)
	end := time.Since(start)
	assert.Equal(t, map[string]any{"status": "completed", "stdout": "done\n", "stderr": "", "cursor": 13.0,
		"exit_code": 0.0, "termination": map[string]any{"reason": "exit"}}, body)
	assert.Less(t, end, 4*time.Second, "the poll returned at the exit, not at yield_ms")

	// Nothing new: no byte twice.
	code, body = poll(t, ts, map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "", body["stdout"])
	assert.Equal(t, 13.0, body["cursor"])
	// A cursor goes back.
	_, body = poll(t, ts, map[string]any{"id": id, "cursor": 0})
	assert.Equal(t, "started\ndone\n", body["stdout"])
}

// TestRunYieldEndsWithin gives /run's reply, plus termination, when the
// command ends within yield_ms.
func TestRunYieldEndsWithin(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "printf out; echo err >&2; exit 3", "yield_ms": 5000})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"stdout": "out", "stderr": "err\n", "code": 3.0, "error": "Non-zero exit code",
		"termination": map[string]any{"reason": "exit"}}, body)
	// It was nobody's background process: not listed, so a stream of such
	// calls pushes no finished process out of the list.
	_, list := call(t, ts, "GET", "/list_processes", nil)
	assert.Empty(t, list["processes"])
}

// TestPollPromptAndInput shows a prompt without a newline and answers it.
func TestPollPromptAndInput(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/run", map[string]any{
		"argv": []string{"python3", "-c", `print("hello " + input("name? "))`}, "yield_ms": 100, "stdin": true})
	require.Equal(t, http.StatusOK, code, body)
	id := body["id"].(string)
	seen := body["stdout"].(string)
	require.Eventually(t, func() bool {
		_, b := poll(t, ts, map[string]any{"id": id, "yield_ms": 100})
		seen += b["stdout"].(string)
		return seen == "name? "
	}, 10*time.Second, time.Millisecond)

	code, body = poll(t, ts, map[string]any{"id": id, "input": "alice\n", "yield_ms": 10000})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hello alice\n", body["stdout"])
	assert.Equal(t, 0.0, body["exit_code"])
}

// TestPollFloodReturnsInTime polls `yes`: the reply comes at yield_ms
// however much is printed, and cursor, missed and the bytes returned add up.
func TestPollFloodReturnsInTime(t *testing.T) {
	// A small ring, so that yes outruns it even under the race detector.
	ts, _ := newTestServer(t, testServer{procs: procs.Options{MaxPollBytes: 64 << 10}})
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "yes", "yield_ms": 0})
	require.Equal(t, http.StatusOK, code)
	id := body["id"].(string)
	cursor := body["cursor"].(float64)
	for range 3 {
		start := time.Now()
		code, body = poll(t, ts, map[string]any{"id": id, "yield_ms": 300, "max_output_bytes": 4096})
		took := time.Since(start)
		require.Equal(t, http.StatusOK, code)
		assert.Less(t, took, 600*time.Millisecond, "a poll of 300 ms took %s", took)
		assert.GreaterOrEqual(t, took, 300*time.Millisecond)
		out := body["stdout"].(string)
		missed, _ := body["missed"].(float64)
		omitted, _ := body["omitted_bytes"].(float64)
		marker := fmt.Sprintf("\n[sandbox-executor: output truncated, %d bytes omitted]\n", int(omitted))
		assert.Positive(t, missed, "yes prints more than the ring keeps in 300 ms")
		assert.Equal(t, "running", body["status"])
		assert.Equal(t, cursor+missed+omitted+float64(len(out)-len(marker)), body["cursor"].(float64),
			"cursor = previous + missed + omitted + returned")
		assert.Contains(t, out, marker)
		assert.LessOrEqual(t, len(out), 4096+len(marker))
		cursor = body["cursor"].(float64)
	}
}

// TestMaxOutputBytes keeps the head and the tail of 10 MB within the budget.
func TestMaxOutputBytes(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	// seq 1 1500000 writes 10,888,896 bytes.
	const total = 10888896
	marker := fmt.Sprintf("\n[sandbox-executor: output truncated, %d bytes omitted]\n", total-1000)
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "seq 1 1500000", "max_output_bytes": 1000})
	require.Equal(t, http.StatusOK, code)
	out := body["stdout"].(string)
	assert.LessOrEqual(t, len(out), 1000+len(marker))
	assert.True(t, strings.HasPrefix(out, "1\n2\n3\n"), out[:20])
	assert.True(t, strings.HasSuffix(out, "1499999\n1500000\n"))
	assert.Contains(t, out, marker)
	assert.Equal(t, true, body["truncated"])
	assert.Equal(t, float64(total-1000), body["omitted_bytes"])
	assert.Equal(t, map[string]any{"reason": "exit"}, body["termination"])

	// Small output is whole, and says nothing of truncation.
	_, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "echo hi", "max_output_bytes": 1000})
	assert.Equal(t, map[string]any{"stdout": "hi\n", "stderr": "", "code": 0.0, "termination": map[string]any{"reason": "exit"}}, body)

	// A poll within a budget: the ring's head and tail.
	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "seq 1 5000; sleep 30", "yield_ms": 0})
	require.Equal(t, http.StatusOK, code)
	id := body["id"].(string)
	require.Eventually(t, func() bool {
		_, b := poll(t, ts, map[string]any{"id": id, "cursor": 0, "max_output_bytes": 100})
		out := b["stdout"].(string)
		if !strings.HasSuffix(out, "\n5000\n") {
			return false
		}
		assert.True(t, strings.HasPrefix(out, "1\n2\n"))
		assert.Positive(t, b["omitted_bytes"])
		assert.Less(t, len(out), 100+80)
		// The middle names log lines (all 5,000 still kept) that hold
		// every omitted byte: the
		// line cut after the head's 50 bytes to the one cut before the
		// tail's 50.
		head, tail := out[:50], out[len(out)-50:]
		firstOmitted := strings.Count(head, "\n") + 1
		lastOmitted := 5000 - strings.Count(tail, "\n") + 1
		m, ok := b["middle"].(map[string]any)
		if !ok || m["last_line"].(float64) < float64(lastOmitted) {
			// The raw bytes are read before their lines are stored: under
			// load the log lags a moment, and the middle it names with it.
			return false
		}
		assert.Equal(t, id, m["id"])
		assert.LessOrEqual(t, m["first_line"], float64(firstOmitted))
		assert.GreaterOrEqual(t, m["first_line"], float64(firstOmitted-2))
		assert.GreaterOrEqual(t, m["last_line"], float64(lastOmitted))
		assert.LessOrEqual(t, m["last_line"], 5000.0)
		return true
	}, 10*time.Second, 20*time.Millisecond)
}

// TestTerminationReasons checks each reason where a reply carries it.
func TestTerminationReasons(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	_, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "kill -SEGV $$", "max_output_bytes": 100})
	assert.Equal(t, map[string]any{"reason": "signal", "signal": "SIGSEGV"}, body["termination"])
	assert.Equal(t, 139.0, body["code"])

	_, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "sleep 30", "timeout": 0.2, "yield_ms": 5000})
	assert.Equal(t, map[string]any{"reason": "timeout"}, body["termination"])
	assert.Equal(t, 124.0, body["code"])

	_, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "sleep 30", "yield_ms": 0})
	id := body["id"].(string)
	code, _ := call(t, ts, "POST", "/kill_process", map[string]any{"id": id, "signal": "SIGTERM"})
	require.Equal(t, http.StatusOK, code)
	_, body = poll(t, ts, map[string]any{"id": id, "yield_ms": 5000})
	assert.Equal(t, map[string]any{"reason": "killed", "signal": "SIGTERM"}, body["termination"])
	assert.Equal(t, "killed", body["status"])

	// run_streaming's complete carries it only when asked.
	resp, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "exit 2", "termination": true})
	defer resp.Body.Close()
	evs := readAll(t, next)
	assert.Equal(t, map[string]any{"code": 2.0, "error": true, "termination": map[string]any{"reason": "exit"}}, evs[len(evs)-1].Data)
	resp, next = stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "exit 2"})
	defer resp.Body.Close()
	evs = readAll(t, next)
	assert.Equal(t, map[string]any{"code": 2.0, "error": true}, evs[len(evs)-1].Data)
}

// TestRunYieldClientGone kills the command of a client that leaves before
// the handover; its later readers see client_gone.
func TestRunYieldClientGone(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	mark := fmt.Sprintf("sleep 31.%d", time.Now().UnixNano()%1000)
	ctx, cancel := contextWithCancel(t)
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/run",
		strings.NewReader(fmt.Sprintf(`{"cmd":%q,"yield_ms":60000}`, mark)))
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
	var id string
	require.Eventually(t, func() bool {
		_, list := call(t, ts, "GET", "/list_processes", nil)
		for _, p := range list["processes"].([]any) {
			if p := p.(map[string]any); p["command"] == mark {
				id = p["id"].(string)
			}
		}
		return id != ""
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.Error(t, <-errc)
	require.Eventually(t, func() bool {
		_, body := poll(t, ts, map[string]any{"id": id})
		return assert.ObjectsAreEqual(map[string]any{"reason": "client_gone"}, body["termination"])
	}, 10*time.Second, 10*time.Millisecond)
}

func TestPollErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, _ := poll(t, ts, map[string]any{"id": "nope"})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = poll(t, ts, map[string]any{})
	assert.Equal(t, http.StatusBadRequest, code)

	_, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "sleep 30", "yield_ms": 0})
	id := body["id"].(string)
	code, _ = poll(t, ts, map[string]any{"id": id, "input": "x"})
	assert.Equal(t, http.StatusConflict, code, "input without stdin")
	code, _ = poll(t, ts, map[string]any{"id": id, "cursor": 5})
	assert.Equal(t, http.StatusBadRequest, code, "cursor past the output")

	// Input a process does not read: 409 after about the yield, not a hang.
	_, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "sleep 30", "yield_ms": 0, "stdin": true})
	start := time.Now()
	code, body = poll(t, ts, map[string]any{"id": body["id"], "input": strings.Repeat("x", 4<<20), "yield_ms": 300})
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Positive(t, body["written"], "what the pipe took is counted")
	assert.Less(t, time.Since(start), 5*time.Second)

	for _, req := range []map[string]any{
		{"cmd": "true", "stdin": true},
		{"cmd": "true", "yield_ms": -1},
		{"cmd": "true", "max_output_bytes": 0},
	} {
		code, body := call(t, ts, "POST", "/run", req)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %v", req, body)
	}
	for _, path := range []string{"/run_streaming", "/start_process"} {
		code, _ := call(t, ts, "POST", path, map[string]any{"cmd": "true", "yield_ms": 100})
		assert.Equal(t, http.StatusBadRequest, code, path)
	}
}

// TestRunYieldInSession commits a session's state when a command handed
// over ends, and runs argv through the session's shell.
func TestRunYieldInSession(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	code, _ := call(t, ts, "POST", "/create_session", map[string]any{"id": "y"})
	require.Equal(t, http.StatusCreated, code)
	code, body := call(t, ts, "POST", "/run", map[string]any{"session": "y", "cmd": "sleep 0.5; cd " + dir + "; export X=1", "yield_ms": 0})
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "running", body["status"])
	id := body["id"]
	_, list := call(t, ts, "GET", "/list_processes", nil)
	for _, p := range list["processes"].([]any) {
		if p := p.(map[string]any); p["id"] == id {
			assert.Equal(t, "sleep 0.5; cd "+dir+"; export X=1", p["command"], "the request's command, not the session's wrapper")
		}
	}
	_, body = poll(t, ts, map[string]any{"id": id, "yield_ms": 10000})
	require.Equal(t, "completed", body["status"], body)
	_, body = call(t, ts, "POST", "/run", map[string]any{"session": "y", "argv": []string{"sh", "-c", `pwd; echo "$X"`}})
	assert.Equal(t, dir+"\n1\n", body["stdout"])
}
