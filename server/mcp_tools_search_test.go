package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// grep is /grep: matches as grep -n prints them, what was skipped, and a
// cut search says so and names the cursor that goes on, which does.
func TestMCPGrep(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")
	dir := t.TempDir()
	for i := 1; i <= 3; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte("package x\n// TODO one\nfunc f() {}\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin.dat"), []byte("TODO\x00"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755))

	res := callSDK(t, cs, "grep", map[string]any{"pattern": "TODO", "path": dir, "context": 1})
	require.False(t, res.IsError, textOf(res))
	f1 := filepath.Join(dir, "f1.go")
	assert.Contains(t, textOf(res), f1+"-1-package x\n"+f1+":2:// TODO one\n"+f1+"-3-func f() {}\n")
	assert.Contains(t, textOf(res), "[3 matches in 3 files; 3 files searched; skipped: 1 binary, 1 excluded]")
	got := structured(t, res)
	assert.Len(t, got["matches"], 3)
	assert.Equal(t, false, got["truncated"])

	res = callSDK(t, cs, "grep", map[string]any{"pattern": "TODO", "path": dir, "max_results": 2})
	require.False(t, res.IsError, textOf(res))
	got = structured(t, res)
	require.Equal(t, true, got["truncated"])
	cursor := got["cursor"].(string)
	assert.Contains(t, textOf(res), fmt.Sprintf(`[truncated: stopped at max_results (2); call grep again with the same arguments and "cursor": %q for the rest]`, cursor))
	res = callSDK(t, cs, "grep", map[string]any{"pattern": "TODO", "path": dir, "max_results": 2, "cursor": cursor})
	got = structured(t, res)
	assert.Equal(t, false, got["truncated"])
	require.Len(t, got["matches"], 1)
	assert.Equal(t, filepath.Join(dir, "f3.go"), got["matches"].([]any)[0].(map[string]any)["path"])

	res = callSDK(t, cs, "grep", map[string]any{"pattern": "nothing here", "path": dir})
	require.False(t, res.IsError, "no match is an answer, not an error")
	assert.True(t, strings.HasPrefix(textOf(res), "no matches\n"))

	res = callSDK(t, cs, "grep", map[string]any{"pattern": "a(b", "path": dir})
	require.True(t, res.IsError)
	assert.Contains(t, textOf(res), "invalid pattern")
	res = callSDK(t, cs, "grep", map[string]any{"pattern": "x", "path": filepath.Join(dir, "missing")})
	assert.True(t, res.IsError)
}

// find_files is /find_files, with the same cursor.
func TestMCPFindFiles(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	for _, name := range []string{"a.go", "b.txt", "sub/c.go", "sub/d.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644))
	}
	res := callSDK(t, cs, "find_files", map[string]any{"path": dir, "glob": "*.go"})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, filepath.Join(dir, "a.go")+" (1 bytes)\n"+filepath.Join(dir, "sub/c.go")+" (1 bytes)\n"+
		filepath.Join(dir, "sub/d.go")+" (1 bytes)\n[3 entries]", textOf(res))

	res = callSDK(t, cs, "find_files", map[string]any{"path": dir, "glob": "*.go", "max_results": 2})
	got := structured(t, res)
	require.Equal(t, true, got["truncated"])
	cursor := got["cursor"].(string)
	assert.Contains(t, textOf(res), fmt.Sprintf(`call find_files again with the same arguments and "cursor": %q for the rest`, cursor))
	got = structured(t, callSDK(t, cs, "find_files", map[string]any{"path": dir, "glob": "*.go", "max_results": 2, "cursor": cursor}))
	require.Len(t, got["entries"], 1)
	assert.Equal(t, filepath.Join(dir, "sub/d.go"), got["entries"].([]any)[0].(map[string]any)["path"])

	res = callSDK(t, cs, "find_files", map[string]any{"path": dir, "type": "dir"})
	assert.Contains(t, textOf(res), filepath.Join(dir, "sub")+"/\n")
	res = callSDK(t, cs, "find_files", map[string]any{"path": dir, "type": "link"})
	assert.True(t, res.IsError)
	assert.Contains(t, textOf(res), "must be one of file, dir, any")
}

// A grep or find_files whose text would pass maxToolOutput stops where
// the text must, says so, and its cursor goes on from there; context
// lines are cut as the match's own line is, and that is said too.
func TestMCPSearchReplyBound(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	cs := connectSDK(t, ts.URL, "")
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 21*1000; i++ {
		if i%21 == 10 {
			b.WriteString("MATCH\n")
		} else {
			b.WriteString(strings.Repeat("x", 300) + "\n")
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(b.String()), 0o644))
	res := callSDK(t, cs, "grep", map[string]any{"pattern": "MATCH", "path": dir, "context": 10, "max_results": 1000})
	require.False(t, res.IsError, textOf(res))
	got := structured(t, res)
	n := len(got["matches"].([]any))
	assert.Greater(t, n, 10)
	assert.Less(t, n, 1000)
	assert.LessOrEqual(t, len(textOf(res)), maxToolOutput+1000)
	assert.Equal(t, true, got["truncated"])
	assert.Contains(t, textOf(res), "[context lines over 240 bytes were cut, ending in …: read_file shows them whole]")
	assert.Contains(t, textOf(res), `[truncated: stopped at the reply's bound of 1048576 bytes of text; call grep again with the same arguments and "cursor": "`)
	last := got["matches"].([]any)[n-1].(map[string]any)["line"].(float64)
	got = structured(t, callSDK(t, cs, "grep", map[string]any{"pattern": "MATCH", "path": dir, "context": 10, "max_results": 1000, "cursor": got["cursor"]}))
	assert.Equal(t, last+21, got["matches"].([]any)[0].(map[string]any)["line"], "the cursor goes on after the last match shown")

	long := strings.Repeat("n", 200)
	for i := range 5000 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%05d", long, i)), nil, 0o644))
	}
	res = callSDK(t, cs, "find_files", map[string]any{"path": dir, "glob": long + "*", "max_results": 5000})
	got = structured(t, res)
	n = len(got["entries"].([]any))
	assert.Less(t, n, 5000)
	assert.LessOrEqual(t, len(textOf(res)), maxToolOutput+1000)
	assert.Contains(t, textOf(res), "[truncated: stopped at the reply's bound of 1048576 bytes of text; call find_files again")
	got = structured(t, callSDK(t, cs, "find_files", map[string]any{"path": dir, "glob": long + "*", "max_results": 5000, "cursor": got["cursor"]}))
	assert.Len(t, got["entries"], 5000-n, "the cursor goes on with the rest")
}
