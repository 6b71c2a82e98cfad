package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
)

// newLimitedContextServer is newContextServer whose runner applies
// rlimits (limitRunner: no cgroup leaves, as on this machine), with
// python3 looked up in the system's directories: the agent's PATH may
// lead to an interpreter under /root (pyenv's shims), which another user
// cannot run.
func newLimitedContextServer(t *testing.T) *httptest.Server {
	t.Helper()
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3:", err)
	}
	ts, _ := newTestServer(t, testServer{runner: limitRunner(), contexts: contexts.Options{
		LookPath: func(name string) (string, error) {
			if name == "python3" {
				return python, nil
			}
			return exec.LookPath(name)
		},
	}})
	return ts
}

func errorEvent(t *testing.T, evs []codeEvent) map[string]any {
	t.Helper()
	ev, ok := findEvent(evs, "error")
	require.True(t, ok, "no error event in %v", evs)
	return ev.data
}

func codeResult(t *testing.T, evs []codeEvent) string {
	t.Helper()
	s, ok := resultText(evs)
	require.True(t, ok, "no result in %v", evs)
	return s
}

// cpuBurn is code that runs until its CPU limit kills the interpreter.
const cpuBurn = "while True: pass"

func TestContextCPULimit(t *testing.T) {
	ts := newLimitedContextServer(t)
	id := createContext(t, ts, map[string]any{"language": "python", "limits": map[string]any{"cpu_seconds": 1}})
	runCode(t, ts, map[string]any{"context": id, "code": "x = 41"})

	evs := runCode(t, ts, map[string]any{"context": id, "code": cpuBurn})
	comp := complete(t, evs)
	assert.Equal(t, "error", comp["status"])
	assert.Equal(t, true, comp["state_lost"])
	assert.Equal(t, 2.0, comp["generation"])
	assert.Equal(t, map[string]any{"reason": "cpu_limit", "signal": "SIGXCPU"}, comp["termination"])
	e := errorEvent(t, evs)
	assert.Equal(t, "ContextRestarted", e["name"])
	assert.Contains(t, e["value"], "its interpreter was killed by its cpu_seconds limit (SIGXCPU)")

	// The next call runs, on a new interpreter (x is gone) that has the
	// same limit.
	evs = runCode(t, ts, map[string]any{"context": id, "code": "'x' in globals()"})
	assert.Equal(t, "False", codeResult(t, evs))
	comp = complete(t, evs)
	assert.Equal(t, "ok", comp["status"])
	assert.Equal(t, false, comp["state_lost"])
	assert.Equal(t, 2.0, comp["generation"])
	assert.NotContains(t, comp, "termination")
	evs = runCode(t, ts, map[string]any{"context": id, "code": "import resource\nresource.getrlimit(resource.RLIMIT_CPU)"})
	assert.Equal(t, "(1, 2)", codeResult(t, evs))
	comp = complete(t, runCode(t, ts, map[string]any{"context": id, "code": cpuBurn}))
	assert.Equal(t, map[string]any{"reason": "cpu_limit", "signal": "SIGXCPU"}, comp["termination"])
	assert.Equal(t, 3.0, comp["generation"])

	code, st := call(t, ts, "GET", "/context_status?id="+id, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"cpu_seconds": 1.0}, st["limits"])
	assert.Equal(t, 3.0, st["generation"])
}

// Python ignores SIGXFSZ: a write past file_size_bytes fails with EFBIG,
// an exception in the cell, and the interpreter lives. A child that
// Python starts with subprocess gets SIGXFSZ back (restore_signals), and
// dies of it.
func TestContextFileSizeLimit(t *testing.T) {
	ts := newLimitedContextServer(t)
	dir := t.TempDir()
	id := createContext(t, ts, map[string]any{"language": "python", "cwd": dir,
		"limits": map[string]any{"file_size_bytes": 1 << 20}})
	runCode(t, ts, map[string]any{"context": id, "code": "x = 41"})

	evs := runCode(t, ts, map[string]any{"context": id, "code": `open("f", "wb").write(b"x" * (2 << 20))`})
	e := errorEvent(t, evs)
	assert.Equal(t, "OSError", e["name"])
	assert.Equal(t, "[Errno 27] File too large", e["value"])
	comp := complete(t, evs)
	assert.Equal(t, "error", comp["status"])
	assert.Equal(t, false, comp["state_lost"])
	assert.Equal(t, 1.0, comp["generation"])
	assert.NotContains(t, comp, "termination")
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())

	evs = runCode(t, ts, map[string]any{"context": id, "code": `import subprocess
r = subprocess.run("head -c 2M /dev/zero > g", shell=True)
r.returncode, x`})
	assert.Equal(t, "(153, 41)", codeResult(t, evs)) // the shell's child died of SIGXFSZ; the state is kept
	fi, err = os.Stat(filepath.Join(dir, "g"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())
}

func TestContextOpenFilesLimit(t *testing.T) {
	ts := newLimitedContextServer(t)
	id := createContext(t, ts, map[string]any{"language": "python", "limits": map[string]any{"open_files": 32}})
	evs := runCode(t, ts, map[string]any{"context": id, "code": `import resource
fs = []
try:
    for _ in range(100):
        fs.append(open("/dev/null"))
except OSError as e:
    err = e
resource.getrlimit(resource.RLIMIT_NOFILE), err.errno, 0 < len(fs) < 32`})
	assert.Equal(t, "((32, 32), 24, True)", codeResult(t, evs))
	assert.Equal(t, "ok", complete(t, evs)["status"])

	// Too low for the interpreter to start: the client's to raise.
	code, body := call(t, ts, "POST", "/create_context", map[string]any{"language": "python", "limits": map[string]any{"open_files": 5}})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body["error"], "the interpreter did not start under its limits (open_files=5): its interpreter exited with code")
	assert.Contains(t, body["error"], "rror 24") // ld.so's "Error 24" or Python's "[Errno 24]"
	_, list := call(t, ts, "GET", "/list_contexts", nil)
	assert.Len(t, list["contexts"], 1)
}

func TestContextLimitsAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	ts := newLimitedContextServer(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o777))
	id := createContext(t, ts, map[string]any{"language": "python", "user": "nobody", "cwd": dir,
		"limits": map[string]any{"cpu_seconds": 1, "open_files": 40, "file_size_bytes": 1 << 20}})
	const who = `import os, resource
os.getuid(), resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_FSIZE)`
	const want = "(65534, (40, 40), (1048576, 1048576))"
	assert.Equal(t, want, codeResult(t, runCode(t, ts, map[string]any{"context": id, "code": who})))
	// nobody cannot raise them.
	evs := runCode(t, ts, map[string]any{"context": id, "code": "resource.setrlimit(resource.RLIMIT_NOFILE, (1000, 1000))"})
	assert.Equal(t, "ValueError", errorEvent(t, evs)["name"])

	comp := complete(t, runCode(t, ts, map[string]any{"context": id, "code": cpuBurn}))
	assert.Equal(t, map[string]any{"reason": "cpu_limit", "signal": "SIGXCPU"}, comp["termination"])
	assert.Equal(t, true, comp["state_lost"])
	// Restarted as nobody, with the same limits.
	assert.Equal(t, want, codeResult(t, runCode(t, ts, map[string]any{"context": id, "code": who})))
}

func TestContextLimitsValidation(t *testing.T) {
	ts := newLimitedContextServer(t)
	for _, tc := range []struct {
		limits any
		code   int
		want   string
	}{
		{map[string]any{"cpu_second": 1}, http.StatusBadRequest, `unknown key in limits: "cpu_second"`},
		{map[string]any{"open_files": 0}, http.StatusBadRequest, "limits.open_files must be a positive integer"},
		{map[string]any{"memory_bytes": -1}, http.StatusBadRequest, "limits.memory_bytes must be a positive integer"},
		{"64M", http.StatusBadRequest, "limits must be an object"},
		{map[string]any{"memory_bytes": 64 << 20}, http.StatusNotImplemented, memoryLimitError},
		{map[string]any{"pids": 10, "cpu_seconds": 5}, http.StatusNotImplemented, memoryLimitError},
	} {
		code, body := call(t, ts, "POST", "/create_context", map[string]any{"language": "python", "limits": tc.limits})
		assert.Equal(t, tc.code, code, "%v", tc.limits)
		if tc.code == http.StatusNotImplemented {
			assert.Equal(t, tc.want, body["error"]) // exactly, as on /run
		} else {
			assert.Contains(t, body["error"], tc.want)
		}
	}
	_, list := call(t, ts, "GET", "/list_contexts", nil)
	assert.Empty(t, list["contexts"])
}

func TestContextSessionLimitsAreDefaults(t *testing.T) {
	ts := newLimitedContextServer(t)
	code, _ := call(t, ts, "POST", "/create_session", map[string]any{"id": "lim", "limits": map[string]any{"open_files": 20, "cpu_seconds": 7}})
	require.Equal(t, http.StatusCreated, code)
	const limits = "import resource\nresource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_NOFILE)"

	id := createContext(t, ts, map[string]any{"language": "python", "session": "lim"})
	assert.Equal(t, "((7, 8), (20, 20))", codeResult(t, runCode(t, ts, map[string]any{"context": id, "code": limits})))

	// The request's own win, key by key.
	id = createContext(t, ts, map[string]any{"language": "python", "session": "lim", "limits": map[string]any{"open_files": 30}})
	assert.Equal(t, "((7, 8), (30, 30))", codeResult(t, runCode(t, ts, map[string]any{"context": id, "code": limits})))
	_, st := call(t, ts, "GET", "/context_status?id="+id, nil)
	assert.Equal(t, map[string]any{"cpu_seconds": 7.0, "open_files": 30.0}, st["limits"])
}

// An interpreter that ends by itself, without limits, says how too.
func TestContextInterpreterEndsByItself(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": "import os\nos._exit(3)"})
	comp := complete(t, evs)
	assert.Equal(t, map[string]any{"reason": "exit"}, comp["termination"])
	assert.Equal(t, true, comp["state_lost"])
	assert.Equal(t, 2.0, comp["generation"])
	assert.Contains(t, errorEvent(t, evs)["value"], "its interpreter exited with code 3;")

	comp = complete(t, runCode(t, ts, map[string]any{"context": id, "code": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"}))
	assert.Equal(t, map[string]any{"reason": "signal", "signal": "SIGTERM"}, comp["termination"])
	assert.Equal(t, 3.0, comp["generation"])

	// The agent's own kill (a timeout past the grace period) has none:
	// the status says it.
	comp = complete(t, runCode(t, ts, map[string]any{"context": id, "timeout": 0.5,
		"code": "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except KeyboardInterrupt:\n        pass"}))
	assert.Equal(t, "timeout", comp["status"])
	assert.Equal(t, true, comp["state_lost"])
	assert.NotContains(t, comp, "termination")
}

// The interpreter's oom_score_adj is above the agent's, as a command's
// is: when memory runs out, the kernel kills it before the agent.
func TestContextInterpreterOOMScoreAdj(t *testing.T) {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Skip("no oom_score_adj:", err)
	}
	own, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	if own >= 1000 {
		t.Skip("the test process's oom_score_adj is already 1000")
	}
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": "int(open('/proc/self/oom_score_adj').read())"})
	assert.Equal(t, strconv.Itoa(min(1000, own+500)), codeResult(t, evs))
}

// An interpreter the user may not run is no fault of the limits: the
// create fails as it does without them.
func TestContextLimitsInterpreterNotRunnable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	python := filepath.Join(t.TempDir(), "python3")
	require.NoError(t, os.WriteFile(python, []byte("#!/bin/sh\nexit 0\n"), 0o700)) // root's alone
	ts, _ := newTestServer(t, testServer{runner: limitRunner(), contexts: contexts.Options{
		LookPath: func(string) (string, error) { return python, nil },
	}})
	for _, limits := range []any{nil, map[string]any{"open_files": 64}} {
		code, body := call(t, ts, "POST", "/create_context", map[string]any{"language": "python", "user": "nobody", "limits": limits})
		assert.Equal(t, http.StatusInternalServerError, code, "%v", limits)
		assert.Equal(t, "failed to start the interpreter", body["error"])
	}
}
