package server

import (
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
)

func TestContextNode(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "javascript"})

	evs := runCode(t, ts, map[string]any{"context": id, "code": "let y = 2"})
	assert.Equal(t, "ok", complete(t, evs)["status"])
	_, has := resultText(evs)
	assert.False(t, has, "undefined has no result")
	res, _ := resultText(runCode(t, ts, map[string]any{"context": id, "code": "y * 21"}))
	assert.Equal(t, "42", res)

	// console.log streams: the first line arrives before the timer ends.
	start := time.Now()
	evs = runCode(t, ts, map[string]any{"context": id, "code": "console.log('a'); new Promise(r => setTimeout(r, 1500))"})
	require.NotEmpty(t, evs)
	assert.Equal(t, "stdout", evs[0].name)
	assert.Equal(t, "a\n", evs[0].data["data"])
	assert.Less(t, evs[0].at.Sub(start), 500*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond)

	evs = runCode(t, ts, map[string]any{"context": id, "code": "throw new RangeError('too far')"})
	assert.Equal(t, "error", complete(t, evs)["status"])
	errEv, ok := findEvent(evs, "error")
	require.True(t, ok)
	assert.Equal(t, "RangeError", errEv.data["name"])
	assert.Equal(t, "too far", errEv.data["value"])

	evs = runCode(t, ts, map[string]any{"context": id, "code": "while (true) {}", "timeout": 1})
	c := complete(t, evs)
	assert.Equal(t, "timeout", c["status"])
	assert.Equal(t, false, c["state_lost"])
	res, _ = resultText(runCode(t, ts, map[string]any{"context": id, "code": "y"}))
	assert.Equal(t, "2", res, "the state is kept")

	// A stateless run.
	res, _ = resultText(runCode(t, ts, map[string]any{"language": "javascript", "code": "[1, 2].map(x => x * 2)"}))
	assert.Equal(t, "[ 2, 4 ]", res)
}

func TestContextNoNode(t *testing.T) {
	ts := newContextServer(t, contexts.Options{LookPath: func(name string) (string, error) {
		if name == "node" {
			return "", exec.ErrNotFound
		}
		return exec.LookPath(name)
	}})
	resp := request(t, ts, http.MethodPost, "/run_code", map[string]any{"language": "javascript", "code": "1"})
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode)
	assert.Equal(t, "node not found on PATH", jsonReply(t, resp)["error"])
}

// The worker's own names are not the code's: a cell may declare what the
// worker uses (fs, send, counts), and sees none of it.
func TestContextNodeWorkerNamesHidden(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "javascript"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": "[typeof send, typeof counts, typeof running, typeof display, typeof require]"})
	assert.Equal(t, "[ 'undefined', 'undefined', 'undefined', 'function', 'function' ]", codeResult(t, evs))
	evs = runCode(t, ts, map[string]any{"context": id, "code": "const fs = require('fs'); let counts = [9, 9]; fs.existsSync('/')"})
	assert.Equal(t, "ok", complete(t, evs)["status"])
	assert.Equal(t, "true", codeResult(t, evs))
	evs = runCode(t, ts, map[string]any{"context": id, "code": "console.log('after'); counts"})
	assert.Equal(t, "after\n", streamText(evs, "stdout"))
	assert.Equal(t, "[ 9, 9 ]", codeResult(t, evs))
}

// Node, as Python, ignores SIGXFSZ: a write past file_size_bytes is an
// EFBIG error in the cell, and the interpreter lives.
func TestContextNodeFileSizeLimit(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	ts, _ := newTestServer(t, testServer{runner: limitRunner()})
	dir := t.TempDir()
	id := createContext(t, ts, map[string]any{"language": "javascript", "cwd": dir, "limits": map[string]any{"file_size_bytes": 1 << 20}})
	runCode(t, ts, map[string]any{"context": id, "code": "let y = 2"})
	evs := runCode(t, ts, map[string]any{"context": id, "code": "require('fs').writeFileSync('f', Buffer.alloc(2 << 20))"})
	assert.Contains(t, errorEvent(t, evs)["value"], "EFBIG: file too large")
	comp := complete(t, evs)
	assert.Equal(t, "error", comp["status"])
	assert.Equal(t, false, comp["state_lost"])
	assert.Equal(t, "[ 2, 1048576 ]", codeResult(t, runCode(t, ts, map[string]any{"context": id, "code": "[y, require('fs').statSync('f').size]"})))
}
