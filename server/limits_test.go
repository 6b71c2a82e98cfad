package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// limitRunner sets rlimits as the agent does where ptrace works (by
// ptrace, with the rlimit helper, run as the test binary (see TestMain)
// through /proc/self/exe, for what prlimit cannot serve); it has no cgroup
// leaves, as this machine has no writable cgroup v2 hierarchy.
func limitRunner() *executor.Runner {
	return &executor.Runner{Helper: "/proc/self/exe", Ptrace: true}
}

// childCPU is the CPU time of this process's waited-for children so far.
func childCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const memoryLimitError = "memory and pids limits need a writable cgroup v2 hierarchy"

func TestRunCPULimit(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	before := childCPU(t)
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "while :; do :; done", "limits": map[string]any{"cpu_seconds": 1}})
	require.Equal(t, http.StatusOK, code)
	// Within 3 s of CPU: on an idle machine, of wall time too. (Shared
	// test machines give the loop a fraction of a core, so it is its
	// CPU time that proves the limit.)
	used := childCPU(t) - before
	assert.GreaterOrEqual(t, used, 500*time.Millisecond) // rusage scales tick samples: under load it may read below the limit
	assert.Less(t, used, 3*time.Second)
	assert.Equal(t, map[string]any{"reason": "cpu_limit", "signal": "SIGXCPU"}, body["termination"])
	assert.Equal(t, 152.0, body["code"])
}

func TestRunFileSizeLimit(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	dir := t.TempDir()
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "head -c 10M /dev/zero > f", "cwd": dir,
		"limits": map[string]any{"file_size_bytes": 1048576}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"reason": "file_size_limit", "signal": "SIGXFSZ"}, body["termination"])
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())

	// Under the limit, the command's own exit, and termination because
	// limits were set.
	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "echo hi", "limits": map[string]any{"file_size_bytes": 1048576}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"reason": "exit"}, body["termination"])
	// Without limits, the reply is as it always was.
	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "echo hi"})
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, "termination")
}

func TestRunLimitsAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o777))
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "id -un; ulimit -n; head -c 10M /dev/zero > f", "cwd": dir,
		"user": "nobody", "limits": map[string]any{"file_size_bytes": 1048576, "open_files": 16}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "nobody\n16\n", body["stdout"])
	assert.Equal(t, map[string]any{"reason": "file_size_limit", "signal": "SIGXFSZ"}, body["termination"])
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())

	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "while :; do :; done", "user": "nobody",
		"limits": map[string]any{"cpu_seconds": 1}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "cpu_limit", body["termination"].(map[string]any)["reason"])
}

func TestRunOpenFilesLimit(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	open100 := `bash -c 'for i in $(seq 100); do exec {fd}</dev/null || exit 1; done; echo opened all'`
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": open100, "limits": map[string]any{"open_files": 16}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 1.0, body["code"])
	assert.Empty(t, body["stdout"])
	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": open100})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "opened all\n", body["stdout"])
}

func TestLimitsLeaveTheAgentsOwn(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	before, err := os.ReadFile("/proc/self/limits")
	require.NoError(t, err)
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "ulimit -t; ulimit -n; ulimit -f",
		"limits": map[string]any{"cpu_seconds": 9, "open_files": 33, "file_size_bytes": 1024 * 1024}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "9\n33\n2048\n", body["stdout"]) // ulimit -f counts 512-byte blocks
	after, err := os.ReadFile("/proc/self/limits")
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

func TestRunStreamingLimits(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	_, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "echo go; while :; do :; done",
		"limits": map[string]any{"cpu_seconds": 1}})
	evs := readAll(t, next)
	require.Len(t, evs, 2)
	assert.Equal(t, "complete", evs[1].Name)
	assert.Equal(t, map[string]any{"reason": "cpu_limit", "signal": "SIGXCPU"}, evs[1].Data["termination"])
}

func TestLimitsValidation(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	for _, tc := range []struct {
		limits any
		want   string
	}{
		{map[string]any{"cpu_second": 1}, `unknown key in limits: "cpu_second"`},
		{map[string]any{"cpu_seconds": 0}, "limits.cpu_seconds must be a positive integer"},
		{map[string]any{"open_files": -3}, "limits.open_files must be a positive integer"},
		{map[string]any{"file_size_bytes": 1.5}, "limits.file_size_bytes must be a positive integer"},
		{map[string]any{"pids": "10"}, "limits.pids must be a positive integer"},
		// Values are checked before the 501.
		{map[string]any{"memory_bytes": 0}, "limits.memory_bytes must be a positive integer"},
		{[]int{1}, "limits must be an object"},
	} {
		for _, path := range []string{"/run", "/run_streaming", "/start_process", "/start_terminal", "/create_session"} {
			body := map[string]any{"cmd": "true", "limits": tc.limits}
			if path == "/start_terminal" || path == "/create_session" {
				delete(body, "cmd")
			}
			code, reply := call(t, ts, "POST", path, body)
			assert.Equal(t, http.StatusBadRequest, code, "%s %v", path, tc.limits)
			assert.Contains(t, reply["error"], tc.want, path)
		}
	}
}

func TestMemoryLimitsWithoutCgroups(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	for _, lim := range []map[string]any{{"memory_bytes": 64 << 20}, {"pids": 10, "cpu_seconds": 5}} {
		for _, path := range []string{"/run", "/run_streaming", "/start_process", "/start_terminal", "/create_session"} {
			body := map[string]any{"cmd": "true", "limits": lim}
			if path == "/start_terminal" || path == "/create_session" {
				delete(body, "cmd")
			}
			code, reply := call(t, ts, "POST", path, body)
			assert.Equal(t, http.StatusNotImplemented, code, path)
			assert.Equal(t, memoryLimitError, reply["error"], path)
		}
	}
	// Nothing was started, nothing created.
	_, list := call(t, ts, "GET", "/list_processes", nil)
	assert.Empty(t, list["processes"])
	_, sessions := call(t, ts, "GET", "/list_sessions", nil)
	assert.Empty(t, sessions["sessions"])
}

func TestInfo(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner(), cfg: Config{Version: "v9"}})
	code, body := call(t, ts, "GET", "/info", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "v9", body["version"])
	assert.Equal(t, map[string]any{"cpu_seconds": true, "file_size_bytes": true, "open_files": true,
		"memory_bytes": false, "pids": false, "mechanism": "rlimit"}, body["limits"])
}

func TestSessionLimitsAreDefaults(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	code, _ := call(t, ts, "POST", "/create_session", map[string]any{"id": "lim", "limits": map[string]any{"open_files": 20, "cpu_seconds": 7}})
	require.Equal(t, http.StatusCreated, code)

	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "ulimit -t; ulimit -n", "session": "lim"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "7\n20\n", body["stdout"])

	// The request's own wins, key by key.
	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "ulimit -t; ulimit -n", "session": "lim",
		"limits": map[string]any{"open_files": 30}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "7\n30\n", body["stdout"])

	// And a background process of the session reports them.
	code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "true", "session": "lim"})
	require.Equal(t, http.StatusCreated, code)
	code, st := call(t, ts, "GET", "/process_status?id="+body["id"].(string), nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"cpu_seconds": 7.0, "open_files": 20.0}, st["limits"])
}

func TestTerminalLimits(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	out := filepath.Join(t.TempDir(), "out")
	code, _ := call(t, ts, "POST", "/start_terminal", map[string]any{"cmd": "ulimit -n > " + out, "limits": map[string]any{"open_files": 21}})
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(out)
		return strings.TrimSpace(string(b)) == "21"
	}, 5*time.Second, 10*time.Millisecond)
}

func TestProcessStatus(t *testing.T) {
	ts, s := newTestServer(t, testServer{runner: limitRunner()})
	code, body := call(t, ts, "POST", "/start_process", map[string]any{"cmd": "while :; do :; done", "limits": map[string]any{"cpu_seconds": 1}})
	require.Equal(t, http.StatusCreated, code)
	assert.Len(t, body, 3, "start_process replies as it always did")
	id := body["id"].(string)

	code, st := call(t, ts, "GET", "/process_status?id="+id, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"id": id, "status": "running", "limits": map[string]any{"cpu_seconds": 1.0}}, st)

	// A second of CPU can take far longer than that on a loaded machine.
	p, err := s.procs.Get(id)
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the CPU limit did not end the process")
	}
	code, st = call(t, ts, "GET", "/process_status?id="+id, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "failed", st["status"])
	assert.Equal(t, 152.0, st["exit_code"])
	assert.Equal(t, map[string]any{"reason": "cpu_limit", "signal": "SIGXCPU"}, st["termination"])

	// Killed through the API.
	code, body = call(t, ts, "POST", "/start_process", map[string]any{"cmd": "sleep 100"})
	require.Equal(t, http.StatusCreated, code)
	id = body["id"].(string)
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	waitStatus(t, s, id)
	_, st = call(t, ts, "GET", "/process_status?id="+id, nil)
	assert.Equal(t, map[string]any{"id": id, "status": "killed", "exit_code": 137.0,
		"termination": map[string]any{"reason": "killed", "signal": "SIGKILL"}}, st)

	code, st = call(t, ts, "GET", "/process_status?id=nope", nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "process not found: nope", st["error"])
	code, _ = call(t, ts, "GET", "/process_status", nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

// /exec_ws takes limits as /run does, on pipes and on a TTY, with argv as
// with cmd: the exit message names the limit that fired. Bad limits are
// refused before anything starts; limits this agent cannot apply are its
// 501.
func TestExecWSLimits(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	dir := t.TempDir()
	limits := map[string]any{"file_size_bytes": 1048576}
	for i, req := range []map[string]any{
		{"cmd": "head -c 10M /dev/zero > f0", "cwd": dir, "limits": limits},
		{"argv": []string{"sh", "-c", "head -c 10M /dev/zero > f1"}, "cwd": dir, "limits": limits},
		{"cmd": "head -c 10M /dev/zero > f2", "cwd": dir, "limits": limits, "tty": true},
	} {
		w := dialExec(t, ts, req)
		w.toEnd()
		assert.Equal(t, map[string]any{"reason": "file_size_limit", "signal": "SIGXFSZ"}, w.termination(), "%v", req)
		fi, err := os.Stat(filepath.Join(dir, "f"+string(rune('0'+i))))
		require.NoError(t, err)
		assert.Equal(t, int64(1<<20), fi.Size(), "%v", req)
	}

	w := dialExec(t, ts, map[string]any{"argv": []string{"sh", "-c", "exit 3"}, "limits": map[string]any{"cpu_seconds": 10}})
	w.toEnd()
	assert.Equal(t, 3, w.code())
	assert.Equal(t, map[string]any{"reason": "exit"}, w.termination())

	for _, req := range []map[string]any{
		{"cmd": "true", "limits": map[string]any{"bogus": 1}},
		{"cmd": "true", "limits": map[string]any{"cpu_seconds": 0}},
		{"cmd": "true", "tty": true, "limits": map[string]any{"open_files": "x"}},
	} {
		w := dialExec(t, ts, req)
		w.toEnd()
		assert.Equal(t, websocket.StatusPolicyViolation, w.close, "%v", req)
		require.NotNil(t, w.refusal, "%v", req)
		assert.Equal(t, 400.0, w.refusal["status"], "%v", req)
		assert.Zero(t, w.pid, "%v: started", req)
	}
	w = dialExec(t, ts, map[string]any{"cmd": "true", "limits": map[string]any{"memory_bytes": 64 << 20}})
	w.toEnd()
	require.NotNil(t, w.refusal)
	assert.Equal(t, 501.0, w.refusal["status"])
	assert.Equal(t, memoryLimitError, w.refusal["error"])
	assert.Zero(t, w.pid)
}
