package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	r3sse "github.com/r3labs/sse/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// startProcess starts cmd in s's registry directly and returns its id.
func startProcess(t *testing.T, _ any, s *Server, cmd string) string {
	t.Helper()
	p, err := s.procs.Start(executor.Command{Cmd: cmd})
	require.NoError(t, err)
	return p.ID
}

func waitStatus(t *testing.T, s *Server, id string) procs.Info {
	t.Helper()
	p, err := s.procs.Get(id)
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("process %s did not end", id)
	}
	return p.Info()
}

func TestStartListKill(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "sleep 100 & echo $!; wait", "env": map[string]string{"A": "1"}})
	require.Equal(t, http.StatusCreated, code)
	require.Len(t, body, 3)
	id := body["id"].(string)
	assert.Len(t, id, 36)
	assert.Positive(t, body["pid"])
	assert.Equal(t, "running", body["status"])

	code, body = call(t, ts, "GET", "/list_processes", nil)
	require.Equal(t, http.StatusOK, code)
	list := body["processes"].([]any)
	require.Len(t, list, 1)
	item := list[0].(map[string]any)
	assert.ElementsMatch(t, []string{"id", "pid", "status", "command", "started_at"}, keys(item))
	assert.Equal(t, "running", item["status"])
	assert.Equal(t, "sleep 100 & echo $!; wait", item["command"])
	_, err := time.Parse(time.RFC3339, item["started_at"].(string))
	assert.NoError(t, err)

	// The grandchild's pid comes from the log.
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	ev, err := next()
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(ev.Data["data"].(string))
	require.NoError(t, err)

	code, body = call(t, ts, "POST", "/kill_process", map[string]string{"id": id})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": true, "message": "Process killed successfully"}, body)
	require.Eventually(t, func() bool { return !testutil.Alive(grandchild) }, 5*time.Second, 10*time.Millisecond)

	// The log stream ends with complete once the process is gone.
	evs := readAll(t, next)
	require.NotEmpty(t, evs)
	assert.Equal(t, `{"message":"stream ended"}`, evs[len(evs)-1].Raw)

	_, body = call(t, ts, "GET", "/list_processes", nil)
	item = body["processes"].([]any)[0].(map[string]any)
	assert.Equal(t, "killed", item["status"], "listed as killed as soon as kill_process returns")
	assert.ElementsMatch(t, []string{"id", "pid", "status", "command", "started_at", "completed_at", "exit_code"}, keys(item))
	assert.Equal(t, 137.0, item["exit_code"])

	code, body = call(t, ts, "POST", "/kill_process", map[string]string{"id": id})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, map[string]any{"success": false, "error": "process is not running (status: killed)"}, body)
	code, body = call(t, ts, "POST", "/kill_process", map[string]string{"id": "nope"})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, map[string]any{"success": false, "error": "process not found: nope"}, body)
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestListProcessesEmptyAndStatuses(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	_, body := call(t, ts, "GET", "/list_processes", nil)
	assert.Equal(t, []any{}, body["processes"])

	ok := startProcess(t, ts, s, "true")
	bad := startProcess(t, ts, s, "exit 4")
	sig := startProcess(t, ts, s, "kill -TERM $$")
	waitStatus(t, s, ok)
	waitStatus(t, s, bad)
	waitStatus(t, s, sig)
	_, body = call(t, ts, "GET", "/list_processes", nil)
	got := map[string]string{}
	for _, it := range body["processes"].([]any) {
		m := it.(map[string]any)
		got[m["id"].(string)] = fmt.Sprintf("%s/%v", m["status"], m["exit_code"])
	}
	assert.Equal(t, map[string]string{ok: "completed/0", bad: "failed/4", sig: "failed/143"}, got)
}

func TestKillWithSignal(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	for _, sig := range []any{"SIGTERM", "TERM", "15", 15, "sigint"} {
		// dash catches SIGINT while it runs a -c command, and one that
		// lands before it has started sleep is lost: signal sleep itself.
		id := startProcess(t, ts, s, "exec sleep 100")
		p, err := s.procs.Get(id)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID))
			return err == nil && string(comm) == "sleep\n"
		}, 5*time.Second, time.Millisecond)
		code, body := call(t, ts, "POST", "/kill_process", map[string]any{"id": id, "signal": sig})
		require.Equal(t, http.StatusOK, code, sig)
		assert.Equal(t, true, body["success"])
		info := waitStatus(t, s, id)
		assert.Equal(t, procs.StatusKilled, info.Status, sig)
	}
}

func TestProcessLogs(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	// Lines of two pipes are merged in the order they are read; the sleeps
	// make that order the order they were written.
	id := startProcess(t, ts, s, "echo one; sleep 0.1; echo two >&2; sleep 0.3; echo three")
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	evs := readAll(t, next)
	require.Len(t, evs, 4)
	wantData := []string{"one", "two", "three"}
	wantStream := []string{"stdout", "stderr", "stdout"}
	for i, ev := range evs[:3] {
		assert.Equal(t, "log", ev.Name)
		assert.Equal(t, strconv.Itoa(i+1), ev.ID)
		assert.Equal(t, wantData[i], ev.Data["data"])
		assert.Equal(t, wantStream[i], ev.Data["stream"])
		ts, err := time.Parse(time.RFC3339Nano, ev.Data["timestamp"].(string))
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), ts, time.Minute)
		assert.Equal(t, time.UTC, ts.Location())
		assert.Len(t, ev.Data, 3)
	}
	assert.Equal(t, "complete", evs[3].Name)
	assert.Equal(t, map[string]any{"message": "stream ended"}, evs[3].Data)

	// Finished: the same lines again, then complete at once. POST with a
	// JSON body, as the document's workflow example sends it.
	_, next = stream(t, ts, "POST", "/process_logs_streaming", map[string]string{"id": id})
	assert.Len(t, readAll(t, next), 4)
}

func TestProcessLogsUnknownIDAndMissingID(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id=nope", nil)
	evs := readAll(t, next)
	require.Len(t, evs, 1)
	assert.Equal(t, "error", evs[0].Name)
	assert.Equal(t, map[string]any{"error": "process not found: nope"}, evs[0].Data)

	code, body := call(t, ts, "GET", "/process_logs_streaming", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "id is required", body["error"])
}

func TestProcessLogsResume(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startProcess(t, ts, s, "seq 1 10")
	waitStatus(t, s, id)

	resp := request(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	resp.Body.Close()
	req, err := http.NewRequest("GET", ts.URL+"/process_logs_streaming?id="+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("Last-Event-ID", "7")
	resp, err = ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	var got []string
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		got = append(got, string(ev.ID)+":"+string(ev.Name))
	}
	assert.Equal(t, []string{"8:log", "9:log", "10:log", ":complete"}, got)

	_, next := stream(t, ts, "GET", "/process_logs_streaming?last_event_id=9&id="+id, nil)
	evs := readAll(t, next)
	require.Len(t, evs, 2)
	assert.Equal(t, "10", evs[0].Data["data"])

	// In a POST body, as a number or a string.
	for _, last := range []any{8, "8"} {
		_, next = stream(t, ts, "POST", "/process_logs_streaming", map[string]any{"id": id, "last_event_id": last})
		evs = readAll(t, next)
		require.Len(t, evs, 3, "last_event_id %v", last)
		assert.Equal(t, "9", evs[0].Data["data"])
	}
}

func TestProcessLogsMissedLines(t *testing.T) {
	ts, s := newTestServer(t, testServer{runner: &executor.Runner{}, procs: procs.Options{MaxLines: 10}})
	id := startProcess(t, ts, s, "seq 1 100")
	waitStatus(t, s, id)
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	evs := readAll(t, next)
	require.Len(t, evs, 12)
	assert.Equal(t, "missed", evs[0].Name)
	assert.Equal(t, 90.0, evs[0].Data["missed"])
	assert.Equal(t, "91", evs[1].Data["data"])
	assert.Equal(t, "91", evs[1].ID)
}

func TestProcessLogsFollowFalse(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startProcess(t, ts, s, "echo first; sleep 100")
	// Each follow=false stream ends at once, whether or not the line has
	// arrived yet; poll until it has.
	var evs []event
	require.Eventually(t, func() bool {
		_, next := stream(t, ts, "GET", "/process_logs_streaming?follow=false&id="+id, nil)
		evs = readAll(t, next)
		return len(evs) == 2
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "first", evs[0].Data["data"])
	assert.Equal(t, "complete", evs[1].Name)
	assert.Equal(t, procs.StatusRunning, statusOf(t, s, id))

	_, next := stream(t, ts, "POST", "/process_logs_streaming", map[string]any{"id": id, "follow": false})
	assert.Len(t, readAll(t, next), 2)
}

// statusOf returns the current status of process id.
func statusOf(t *testing.T, s *Server, id string) procs.Status {
	t.Helper()
	p, err := s.procs.Get(id)
	require.NoError(t, err)
	return p.Info().Status
}

// A reader that has gone is removed at once, and a stalled reader blocks
// neither the process nor another reader.
func TestProcessLogsReadersLeaveAndStall(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startProcess(t, ts, s, "i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done; sleep 0.2")
	p, err := s.procs.Get(id)
	require.NoError(t, err)

	// A stalled reader: connected, never reads.
	stalledCtx, stallCancel := contextWithCancel(t)
	req, err := http.NewRequestWithContext(stalledCtx, "GET", ts.URL+"/process_logs_streaming?id="+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	stalled, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer stalled.Body.Close()

	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	evs := readAll(t, next)
	assert.Equal(t, "complete", evs[len(evs)-1].Name)
	waitStatus(t, s, id)

	stallCancel()
	require.Eventually(t, func() bool { return p.Subscribers() == 0 }, 5*time.Second, 10*time.Millisecond,
		"readers that left are removed")
}

// r3labs/sse is an independent client: it must see every log line.
func TestProcessLogsWithR3labsClient(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startProcess(t, ts, s, "for i in 1 2 3 4 5; do echo l$i; done")
	waitStatus(t, s, id)

	c := r3sse.NewClient(ts.URL + "/process_logs_streaming?id=" + id)
	c.Headers["Authorization"] = "Bearer " + testSecret
	c.ReconnectStrategy = nil
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.SubscribeRawWithContext(ctx, func(msg *r3sse.Event) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(msg.Event)+" "+string(msg.ID)+" "+string(msg.Data))
			if string(msg.Event) == "complete" {
				cancel()
			}
		})
	}()
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 6)
	assert.Contains(t, got[0], `log 1 {"timestamp":`)
	assert.Contains(t, got[4], `"data":"l5"}`)
	// The SSE spec carries the last id forward to events without one.
	assert.Equal(t, `complete 5 {"message":"stream ended"}`, got[5])
}

// Past MaxRunning, start_process is 503 with a JSON error: the server's
// limit, not the request's fault, and it passes once a process ends.
func TestStartProcessTooMany(t *testing.T) {
	ts, _ := newTestServer(t, testServer{procs: procs.Options{MaxRunning: 1}})
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "sleep 100"})
	require.Equal(t, http.StatusCreated, code)
	id := body["id"].(string)
	code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true"})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, map[string]any{"error": "too many running background processes (limit 1)"}, body)

	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool {
		code, _ = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true"})
		return code == http.StatusCreated
	}, 5*time.Second, 10*time.Millisecond)
}

// A command that exited but left processes in its group (`npm start &`)
// shows completed; kill_process kills what it left and succeeds, and once
// nothing is left it is refused as before.
//
// This needs executor.Process.Signal to reach a finished command's group
// (branch h8-exec); without it the first kill_process is 400.
func TestKillProcessLeftovers(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startProcess(t, ts, s, "sleep 100 & echo $!")
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	ev, err := next()
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(ev.Data["data"].(string))
	require.NoError(t, err)
	// The sleep holds the pipes: the command ends after the drain delay.
	require.Equal(t, procs.StatusCompleted, waitStatus(t, s, id).Status)
	require.True(t, testutil.Alive(grandchild))

	code, body := call(t, ts, "POST", "/kill_process", map[string]any{"id": id})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"success": true,
		"message": "The command had already exited (status: completed); SIGKILL was sent to the processes it left in its group"}, body)
	require.Eventually(t, func() bool { return !testutil.Alive(grandchild) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, procs.StatusCompleted, statusOf(t, s, id), "the status stays")

	require.Eventually(t, func() bool {
		code, body = call(t, ts, "POST", "/kill_process", map[string]any{"id": id})
		return code != http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, map[string]any{"success": false, "error": "process is not running (status: completed)"}, body)
}

// Last-Event-ID 18446744073709551615 is past the last line: the stream
// sends complete only, instead of wrapping around and replaying every
// line. One more does not parse.
func TestProcessLogsLastEventIDOverflow(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startProcess(t, ts, s, "seq 1 10")
	waitStatus(t, s, id)
	for _, via := range []string{"header", "query"} {
		path := "/process_logs_streaming?id=" + id
		req, err := http.NewRequest("GET", ts.URL+path, nil)
		require.NoError(t, err)
		if via == "header" {
			req.Header.Set("Last-Event-ID", "18446744073709551615")
		} else {
			req.URL.RawQuery += "&last_event_id=18446744073709551615"
		}
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		r := sse.NewReader(resp.Body)
		var got []string
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			got = append(got, string(ev.Name))
		}
		resp.Body.Close()
		assert.Equal(t, []string{"complete"}, got, via)
	}
	code, body := call(t, ts, "GET", "/process_logs_streaming?last_event_id=18446744073709551616&id="+id, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Last-Event-ID must be a line number", body["error"])
}

// Every error reply of kill_process carries "success": false, not only
// the documented ones.
func TestKillProcessErrorsCarrySuccessFalse(t *testing.T) {
	ts, s := newTestServer(t, testServer{cfg: Config{MaxBody: 100}, runner: &executor.Runner{}})
	done := startProcess(t, ts, s, "true")
	waitStatus(t, s, done)
	tests := []struct {
		name string
		body any
		code int
		err  string
	}{
		{"malformed", `{"id": `, http.StatusBadRequest, "invalid request: unexpected EOF"},
		{"not an object", `[1]`, http.StatusBadRequest, "invalid request: body must be a JSON object"},
		{"wrong type", `{"id": 5}`, http.StatusBadRequest, `invalid request: field "id" must be a string`},
		{"signal of a wrong type", `{"id": "x", "signal": true}`, http.StatusBadRequest, `invalid request: field "signal" must be a string or a number`},
		{"no id", `{}`, http.StatusBadRequest, "id is required"},
		{"unknown signal", map[string]any{"id": done, "signal": "SIGNOPE"}, http.StatusBadRequest, "unknown signal: SIGNOPE"},
		{"too large", `{"id": "` + strings.Repeat("x", 200) + `"}`, http.StatusRequestEntityTooLarge, "request body too large (limit 100 bytes)"},
		{"unknown id", map[string]any{"id": "nope"}, http.StatusBadRequest, "process not found: nope"},
		{"finished", map[string]any{"id": done}, http.StatusBadRequest, "process is not running (status: completed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, ts, "POST", "/kill_process", tt.body)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, map[string]any{"success": false, "error": tt.err}, body)
		})
	}
}
