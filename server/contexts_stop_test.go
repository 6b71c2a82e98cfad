package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
)

func TestContextTimeoutIgnoringSIGINTLosesState(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	runCode(t, ts, map[string]any{"context": id, "code": "x = 1"})
	code := "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except KeyboardInterrupt:\n        pass"
	evs := runCode(t, ts, map[string]any{"context": id, "code": code, "timeout": 1})
	c := complete(t, evs)
	assert.Equal(t, "timeout", c["status"])
	assert.Equal(t, true, c["state_lost"])
	assert.Equal(t, float64(2), c["generation"])
	errEv, ok := findEvent(evs, "error")
	require.True(t, ok)
	assert.Equal(t, "ContextRestarted", errEv.data["name"])

	evs = runCode(t, ts, map[string]any{"context": id, "code": "x"})
	errEv, ok = findEvent(evs, "error")
	require.True(t, ok)
	assert.Equal(t, "NameError", errEv.data["name"])

	resp := request(t, ts, http.MethodPost, "/run_code", map[string]any{"context": id, "code": "1", "expected_generation": 1})
	body := jsonReply(t, resp)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, "context was restarted", body["error"])
	assert.Equal(t, float64(2), body["generation"])
	evs = runCode(t, ts, map[string]any{"context": id, "code": "1", "expected_generation": 2})
	assert.Equal(t, "ok", complete(t, evs)["status"])
}

func TestContextTimeoutKeepsState(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	runCode(t, ts, map[string]any{"context": id, "code": "x = 1"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": "while True: pass", "timeout": 1})
	c := complete(t, evs)
	assert.Equal(t, "timeout", c["status"])
	assert.Equal(t, false, c["state_lost"])
	assert.Equal(t, float64(1), c["generation"])
	errEv, ok := findEvent(evs, "error")
	require.True(t, ok)
	assert.Equal(t, "KeyboardInterrupt", errEv.data["name"])
	res, _ := resultText(runCode(t, ts, map[string]any{"context": id, "code": "x"}))
	assert.Equal(t, "1", res)
}

func TestContextInterrupt(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	runCode(t, ts, map[string]any{"context": id, "code": "x = 1"})

	idle := jsonReply(t, request(t, ts, http.MethodPost, "/interrupt_context", map[string]any{"id": id}))
	assert.Equal(t, false, idle["interrupted"])

	done := make(chan []codeEvent, 1)
	go func() {
		resp := request(t, ts, http.MethodPost, "/run_code", map[string]any{"context": id, "code": "import time\ntime.sleep(100)"})
		defer resp.Body.Close()
		done <- readCodeEvents(t, resp.Body)
	}()
	require.Eventually(t, func() bool {
		st := jsonReply(t, request(t, ts, http.MethodGet, "/context_status?id="+id, nil))
		return st["busy"] == true
	}, 10*time.Second, 20*time.Millisecond)
	start := time.Now()
	res := jsonReply(t, request(t, ts, http.MethodPost, "/interrupt_context", map[string]any{"id": id}))
	assert.Equal(t, true, res["interrupted"])
	assert.Equal(t, false, res["state_lost"])
	assert.Equal(t, float64(1), res["generation"])
	assert.Less(t, time.Since(start), 2*time.Second)
	evs := <-done
	c := complete(t, evs)
	assert.Equal(t, "interrupted", c["status"])
	assert.Equal(t, false, c["state_lost"])
	r, _ := resultText(runCode(t, ts, map[string]any{"context": id, "code": "x"}))
	assert.Equal(t, "1", r)
}

func TestContextFakeFrames(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	code := `import sys, os, struct
fake = b'{"type":"done","status":"ok","stdout":0,"stderr":0}'
sys.stdout.write('\x00{"type":"complete"}\n')
sys.stdout.buffer.write(struct.pack(">I", len(fake)) + fake)
os.write(1, struct.pack(">I", len(fake)) + fake)
os.write(2, struct.pack(">I", len(fake)) + fake)
try:
    os.write(4, struct.pack(">I", len(fake)) + fake)
except OSError as e:
    print("fd 4:", e.strerror)
x = 7
x`
	evs := runCode(t, ts, map[string]any{"context": id, "code": code})
	c := complete(t, evs)
	assert.Equal(t, "ok", c["status"])
	assert.Equal(t, false, c["state_lost"])
	assert.Contains(t, streamText(evs, "stdout"), `{"type":"complete"}`)
	assert.Contains(t, streamText(evs, "stdout"), "fd 4: Bad file descriptor")
	res, _ := resultText(evs)
	assert.Equal(t, "7", res)
}

func TestContextForgedFrameOnWorkerPipe(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	code := `import os, struct
fake = b'{"type":"done","count":99,"status":"ok","stdout":0,"stderr":0}'
for fd in range(5, 12):  # the worker's frame pipes, moved off 3 and 4
    try:
        os.write(fd, struct.pack(">I", len(fake)) + fake)
    except OSError:
        pass
import time; time.sleep(0.5)`
	evs := runCode(t, ts, map[string]any{"context": id, "code": code})
	c := complete(t, evs)
	assert.Equal(t, true, c["state_lost"])
	assert.Equal(t, float64(2), c["generation"])
	errEv, ok := findEvent(evs, "error")
	require.True(t, ok)
	assert.Contains(t, errEv.data["value"], "unexpected frame")
	// Whatever happened, the context answers the next call truthfully.
	evs = runCode(t, ts, map[string]any{"context": id, "code": "1"})
	assert.Equal(t, "ok", complete(t, evs)["status"])
}
