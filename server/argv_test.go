package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunArgv runs programs with exact arguments, no shell: a word with a
// space stays one word, and a program not found is the command's own 127.
func TestRunArgv(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	spaced := filepath.Join(dir, "a file")
	require.NoError(t, os.WriteFile(spaced, []byte("x"), 0o644))

	code, body := call(t, ts, "POST", "/run", map[string]any{"argv": []string{"ls", "-la", spaced}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 0.0, body["code"], body)
	assert.Contains(t, body["stdout"], spaced)

	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{"sh", "-c", "echo hi; exit 3"}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"stdout": "hi\n", "stderr": "", "code": 3.0, "error": "Non-zero exit code"}, body)

	// $HOME and globs are the program's words, not the shell's.
	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{"printf", "%s|", "$HOME", "*", "'q'"}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "$HOME|*|'q'|", body["stdout"])

	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{"no-such-program-here", "x"}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 127.0, body["code"])
	assert.Contains(t, body["stderr"], "no-such-program-here")
	assert.Contains(t, body["stderr"], "not found")

	// Found but not executable by execve: the shell's own report.
	noInterp := filepath.Join(dir, "nointerp")
	require.NoError(t, os.WriteFile(noInterp, []byte("#!/no/such/interpreter\n"), 0o755))
	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{noInterp}})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 127.0, body["code"], body)
	assert.Contains(t, body["stderr"], "nointerp")
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))
	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{plain}})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 126.0, body["code"], body)

	// Executable to root, not to the user it runs as: execve refuses it
	// for that user, and the shell reports it.
	rootOnly := filepath.Join(dir, "rootonly")
	require.NoError(t, os.WriteFile(rootOnly, []byte("#!/bin/sh\necho ran\n"), 0o700))
	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{rootOnly}, "user": "nobody"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 126.0, body["code"], body)
	assert.Empty(t, body["stdout"])

	// PATH is the command's own environment's.
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\necho mine \"$@\"\n"), 0o755))
	code, body = call(t, ts, "POST", "/run", map[string]any{"argv": []string{"mytool", "a b"},
		"env": map[string]string{"PATH": bin + ":/usr/bin:/bin"}})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "mine a b\n", body["stdout"])
}

func TestArgvValidation(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, path := range []string{"/run", "/run_streaming", "/start_process"} {
		for name, req := range map[string]map[string]any{
			"both":        {"cmd": "true", "argv": []string{"true"}},
			"empty":       {"argv": []string{}},
			"empty word":  {"argv": []string{""}},
			"not strings": {"argv": []any{"echo", 1}},
			"neither":     {},
		} {
			code, body := call(t, ts, "POST", path, req)
			assert.Equal(t, http.StatusBadRequest, code, "%s %s: %v", path, name, body)
		}
	}
}

// TestArgvBackgroundAndStreaming runs argv through /start_process and
// /run_streaming, and in a session, whose state it still keeps.
func TestArgvBackgroundAndStreaming(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	resp, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"argv": []string{"echo", "a  b"}})
	defer resp.Body.Close()
	evs := readAll(t, next)
	require.Len(t, evs, 2)
	assert.Equal(t, "a  b", evs[0].Data["data"])

	code, body := call(t, ts, "POST", "/start_process", map[string]any{"argv": []string{"sh", "-c", "echo $0", "it's"}})
	require.Equal(t, http.StatusCreated, code)
	id := body["id"].(string)
	require.Eventually(t, func() bool {
		_, list := call(t, ts, "GET", "/list_processes", nil)
		for _, p := range list["processes"].([]any) {
			if p := p.(map[string]any); p["id"] == id {
				assert.Equal(t, `'sh' '-c' 'echo $0' 'it'\''s'`, p["command"])
				return p["status"] == "completed"
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)

	dir := t.TempDir()
	code, _ = call(t, ts, "POST", "/create_session", map[string]any{"id": "s1"})
	require.Equal(t, http.StatusCreated, code)
	code, body = call(t, ts, "POST", "/run", map[string]any{"session": "s1", "argv": []string{"cd", dir}})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 0.0, body["code"], body)
	_, body = call(t, ts, "POST", "/run", map[string]any{"session": "s1", "argv": []string{"pwd"}})
	assert.Equal(t, dir+"\n", body["stdout"])
}
