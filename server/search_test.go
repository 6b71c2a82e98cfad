package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/search"
)

// searchTree writes a small tree: n files each with one match of
// "needle", and one in node_modules that the defaults prune.
func searchTree(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		p := filepath.Join(dir, "src", fmt.Sprintf("f%02d.go", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("package x\n// needle here\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "node_modules", "m"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "node_modules", "m", "i.js"), []byte("needle\n"), 0o644))
	return dir
}

func TestGrepPagesWithCursor(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := searchTree(t, 25)
	seen := map[string]int{}
	cursor, excluded := "", 0.0
	for range 10 { // 25 matches by 10: three pages
		code, body := call(t, ts, "POST", "/grep", map[string]any{"pattern": "needle", "path": dir, "max_results": 10, "cursor": cursor})
		require.Equal(t, http.StatusOK, code, body)
		for _, m := range body["matches"].([]any) {
			mm := m.(map[string]any)
			assert.Equal(t, 2.0, mm["line"])
			assert.Equal(t, 4.0, mm["column"])
			seen[mm["path"].(string)]++
		}
		excluded += body["skipped"].(map[string]any)["excluded"].(float64)
		c, _ := body["cursor"].(string)
		if body["stopped_by"] == "end" {
			assert.Equal(t, false, body["truncated"])
			break
		}
		assert.Equal(t, "max_results", body["stopped_by"])
		assert.Equal(t, true, body["truncated"])
		require.NotEmpty(t, c)
		cursor = c
	}
	assert.Len(t, seen, 25)
	assert.Equal(t, 1.0, excluded, "node_modules, once over all the pages")
	for p, n := range seen {
		assert.Equal(t, 1, n, p)
	}

	code, body := call(t, ts, "POST", "/grep", map[string]any{"pattern": "needle", "path": dir, "exclude_defaults": false, "max_results": 100})
	require.Equal(t, http.StatusOK, code)
	assert.Len(t, body["matches"], 26, "node_modules searched too")
	assert.Equal(t, []any{}, body["excluded_by_default"])
}

func TestGrepErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := searchTree(t, 1)

	code, body := call(t, ts, "POST", "/grep", map[string]any{"pattern": "(", "path": dir})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "(", body["pattern"])
	assert.Contains(t, body["error"], "invalid pattern: ")

	code, body = call(t, ts, "POST", "/grep", map[string]any{"pattern": "x", "path": filepath.Join(dir, "missing")})
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body["error"], "no such file or directory")

	code, body = call(t, ts, "POST", "/grep", map[string]any{"path": dir})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "pattern is required", body["error"])

	code, _ = call(t, ts, "POST", "/grep", map[string]any{"pattern": "x", "path": dir, "cursor": "!!"})
	assert.Equal(t, http.StatusBadRequest, code)

	// A search as a user runs with that user's rights (TestSearchAsUser);
	// a user or session that does not exist is refused, never searched
	// with the agent's rights.
	code, _ = call(t, ts, "POST", "/grep", map[string]any{"pattern": "x", "path": dir, "user": "no-such-user-here"})
	assert.Equal(t, http.StatusBadRequest, code, "a search never gives the agent's view to a client that asked for a user's")
	code, _ = call(t, ts, "POST", "/find_files", map[string]any{"path": dir, "session": "s"})
	assert.Equal(t, http.StatusNotFound, code)

	code, _ = call(t, ts, "POST", "/find_files", map[string]any{"path": dir, "type": "socket"})
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, ts, "POST", "/find_files", map[string]any{"path": filepath.Join(dir, "missing")})
	assert.Equal(t, http.StatusNotFound, code)
}

// The streamed form carries the same matches, one per line, then the
// summary; a bad pattern is still a 400, decided before the stream.
func TestGrepStream(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := searchTree(t, 5)
	whole, err := search.New("").Grep(t.Context(), search.GrepRequest{Pattern: "needle", Path: dir})
	require.NoError(t, err)

	for _, how := range []struct{ query, accept string }{{"?stream=1", ""}, {"", ndjsonType}} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/grep"+how.query,
			jsonBody(t, map[string]any{"pattern": "needle", "path": dir}))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		if how.accept != "" {
			req.Header.Set("Accept", how.accept)
		}
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, ndjsonType, resp.Header.Get("Content-Type"))
		var lines []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var v map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &v))
			lines = append(lines, v)
		}
		resp.Body.Close()
		require.Len(t, lines, len(whole.Matches)+1)
		for i, m := range whole.Matches {
			assert.Equal(t, m.Path, lines[i]["path"])
		}
		last := lines[len(lines)-1]
		assert.NotContains(t, last, "matches")
		assert.Equal(t, "end", last["stopped_by"])
		assert.Equal(t, 5.0, last["files_matched"])
	}

	resp := request(t, ts, "POST", "/grep?stream=1", map[string]any{"pattern": "(", "path": dir})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
}

func TestFindFiles(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := searchTree(t, 3)
	code, body := call(t, ts, "POST", "/find_files", map[string]any{"path": dir, "glob": "**/*.go", "max_results": 2})
	require.Equal(t, http.StatusOK, code)
	entries := body["entries"].([]any)
	require.Len(t, entries, 2)
	assert.Equal(t, 1.0, body["skipped"].(map[string]any)["excluded"], "node_modules, walked before src")
	e := entries[0].(map[string]any)
	assert.Equal(t, filepath.Join(dir, "src", "f00.go"), e["path"])
	assert.Equal(t, "file", e["type"])
	assert.Equal(t, true, body["truncated"])
	assert.Equal(t, "max_results", body["stopped_by"])

	code, body = call(t, ts, "POST", "/find_files", map[string]any{"path": dir, "glob": "**/*.go", "cursor": body["cursor"]})
	require.Equal(t, http.StatusOK, code)
	entries = body["entries"].([]any)
	require.Len(t, entries, 1)
	assert.Equal(t, filepath.Join(dir, "src", "f02.go"), entries[0].(map[string]any)["path"])
	assert.Equal(t, "end", body["stopped_by"])

	code, body = call(t, ts, "POST", "/find_files", map[string]any{"path": dir, "type": "dir"})
	require.Equal(t, http.StatusOK, code)
	assert.Len(t, body["entries"], 1, "src; node_modules pruned")
}

func jsonBody(t *testing.T, v any) *bytes.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// TestFindFilesStreamedReply: the reply written entry by entry is the
// JSON of the whole search.FindReply, names that need escaping included,
// and a bad request is still a 4xx, decided before anything is written.
func TestFindFilesStreamedReply(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	dir := t.TempDir()
	for _, name := range []string{"plain.go", `q"uote.go`, "new\nline.go", "<a&b>.go", "bad\xff.go", "back\\slash.go", "é.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644))
	}
	for _, req := range []map[string]any{
		{"path": dir, "glob": "**/*.go"},
		{"path": dir, "glob": "*.go", "max_results": 3},
		{"path": dir, "glob": "*.none"},
		{"path": dir, "type": "any", "max_results": 1, "timeout": 1e-9},
	} {
		raw, err := json.Marshal(req)
		require.NoError(t, err)
		var fr search.FindRequest
		require.NoError(t, json.Unmarshal(raw, &fr))
		want, err := s.search.FindFiles(t.Context(), fr)
		require.NoError(t, err)
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		var wantBody map[string]any
		require.NoError(t, json.Unmarshal(wantJSON, &wantBody))
		code, body := call(t, ts, "POST", "/find_files", req)
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, wantBody, body, "%v", req)
	}
	code, body := call(t, ts, "POST", "/find_files", map[string]any{"path": filepath.Join(dir, "missing")})
	assert.Equal(t, http.StatusNotFound, code, body)
	code, body = call(t, ts, "POST", "/find_files", map[string]any{"path": dir, "glob": "[", "type": "file"})
	assert.Equal(t, http.StatusBadRequest, code, body)
}

// A /grep?stream=1 client that stays connected but stops reading is let
// go after the stall timeout: the handler returns, and with it the walk
// (it runs in the handler's goroutine), long before the search could
// have ended by itself, and nothing is left running (goleak checks the
// package's goroutines at its end).
func TestGrepStreamStalledClientLetGo(t *testing.T) {
	const stall = 300 * time.Millisecond
	ts, _ := newTestServer(t, testServer{cfg: Config{StallTimeout: stall}})
	dir := t.TempDir()
	// Every line matches, and each match carries 100 lines of context:
	// about 20 KB of NDJSON per match, 40 MB per file, 800 MB in all,
	// far more than the socket buffers between the agent and the client.
	content := strings.Repeat("needle "+strings.Repeat("x", 200)+"\n", 2000)
	for i := range 20 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", i)), []byte(content), 0o644))
	}
	body, err := json.Marshal(map[string]any{"pattern": "needle", "path": dir, "context": 50, "max_results": 1 << 30, "timeout": 600})
	require.NoError(t, err)
	_, br := rawRequest(t, ts, "POST", "/grep?stream=1", string(body))
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, " 200 ")
	const handler = "server.(*Server).handleGrep"
	require.Equal(t, 1, handlersIn(handler), "the search is under way")
	// From here on the client reads nothing.
	stopped := time.Now()
	require.Eventually(t, func() bool { return handlersIn(handler) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the stalled client's grep is still running")
	assert.GreaterOrEqual(t, time.Since(stopped), stall/2, "let go by the stall timeout, not before")
}

// TestSearchAsUser: a grep or a find_files as a user runs with that
// user's rights: a file only root may read is not searched and counts in
// skipped.unreadable, as does a directory only root may list; what the
// user may read is searched as usual, streamed or not.
func TestSearchAsUser(t *testing.T) {
	work, _ := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	writeTestFile(t, filepath.Join(work, "open.txt"), "needle\n")
	writeTestFile(t, filepath.Join(work, "secret.txt"), "needle\n")
	require.NoError(t, os.Chmod(filepath.Join(work, "secret.txt"), 0o600))
	writeTestFile(t, filepath.Join(work, "private", "x.txt"), "needle\n")
	require.NoError(t, os.Chmod(filepath.Join(work, "private"), 0o700))

	paths := func(body map[string]any, key string) []string {
		var out []string
		for _, m := range body[key].([]any) {
			out = append(out, strings.TrimPrefix(m.(map[string]any)["path"].(string), work+"/"))
		}
		return out
	}
	code, body := call(t, ts, "POST", "/grep", map[string]any{"pattern": "needle", "path": work, "user": "nobody"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, []string{"open.txt"}, paths(body, "matches"))
	assert.Equal(t, 2.0, body["skipped"].(map[string]any)["unreadable"], "secret.txt and private/")
	assert.Equal(t, 1.0, body["files_scanned"])

	code, body = call(t, ts, "POST", "/grep", map[string]any{"pattern": "needle", "path": work})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, []string{"open.txt", "private/x.txt", "secret.txt"}, paths(body, "matches"), "the agent reads all three")
	assert.Equal(t, 0.0, body["skipped"].(map[string]any)["unreadable"])

	resp := request(t, ts, "POST", "/grep?stream=1", map[string]any{"pattern": "needle", "path": work, "user": "nobody"})
	var lines []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var v map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v))
		lines = append(lines, v)
	}
	resp.Body.Close()
	require.Len(t, lines, 2)
	assert.Equal(t, filepath.Join(work, "open.txt"), lines[0]["path"])
	assert.Equal(t, 2.0, lines[1]["skipped"].(map[string]any)["unreadable"])

	code, body = call(t, ts, "POST", "/find_files", map[string]any{"path": work, "type": "any", "user": "nobody"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, []string{"open.txt", "private", "secret.txt"}, paths(body, "entries"), "listed, not read; private/ cannot be listed")
	assert.Equal(t, 1.0, body["skipped"].(map[string]any)["unreadable"])

	// A path the user may not reach at all is 403, as /files says it.
	code, _ = call(t, ts, "POST", "/grep", map[string]any{"pattern": "needle", "path": filepath.Join(work, "private"), "user": "nobody"})
	assert.Equal(t, http.StatusForbidden, code)
}
