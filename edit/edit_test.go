package edit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/files"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func etagOf(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return files.ETag(fi)
}

func TestEditReplaces(t *testing.T) {
	p := writeFile(t, t.TempDir(), "a.go", "package a\n\nfunc A() int {\n\treturn 1\n}\n", 0o640)
	rep, err := EditFile(t.Context(), EditRequest{Path: p, Old: "return 1", New: "return 2"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "package a\n\nfunc A() int {\n\treturn 2\n}\n", read(t, p))
	assert.True(t, rep.Success)
	assert.Equal(t, 1, rep.Replacements)
	assert.Equal(t, etagOf(t, p), rep.ETag)
	assert.Equal(t, "--- "+p+"\n+++ "+p+"\n@@ -1,5 +1,5 @@\n package a\n \n func A() int {\n-\treturn 1\n+\treturn 2\n }\n", rep.Diff)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "the mode is kept")
}

// TestEditKeepsOwner: a file replaced by the agent keeps its owner.
func TestEditKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file another owner")
	}
	p := writeFile(t, t.TempDir(), "f", "x = 1\n", 0o600)
	require.NoError(t, os.Chown(p, 65534, 65534))
	_, err := EditFile(t.Context(), EditRequest{Path: p, Old: "1", New: "2"}, nil)
	require.NoError(t, err)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Equal(t, [2]uint32{65534, 65534}, [2]uint32{st.Uid, st.Gid})
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestEditTwoMatchesRefused(t *testing.T) {
	p := writeFile(t, t.TempDir(), "f", "a = 1\nb = 2\na = 1\n", 0o644)
	before := etagOf(t, p)
	_, err := EditFile(t.Context(), EditRequest{Path: p, Old: "a = 1", New: "a = 3"}, nil)
	var ce *CountError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, []int{1, 3}, ce.Lines)
	assert.Equal(t, "a = 1\nb = 2\na = 1\n", read(t, p))
	assert.Equal(t, before, etagOf(t, p), "the file is not touched")

	_, err = EditFile(t.Context(), EditRequest{Path: p, Old: "a = 1", New: "a = 3", ExpectedCount: 2}, nil)
	require.NoError(t, err)
	assert.Equal(t, "a = 3\nb = 2\na = 3\n", read(t, p))

	rep, err := EditFile(t.Context(), EditRequest{Path: p, Old: "a = 3", New: "a = 4", ReplaceAll: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Replacements)
	assert.Equal(t, "a = 4\nb = 2\na = 4\n", read(t, p))
}

func TestEditNotFound(t *testing.T) {
	p := writeFile(t, t.TempDir(), "f", "def hello():\n    return 42\n", 0o644)
	_, err := EditFile(t.Context(), EditRequest{Path: p, Old: "    return 43", New: "x"}, nil)
	var ne *NoMatchError
	require.ErrorAs(t, err, &ne)
	assert.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, "old text not found", err.Error())
	assert.Equal(t, &Line{Line: 2, Text: "    return 42"}, ne.Closest)

	_, err = EditFile(t.Context(), EditRequest{Path: filepath.Join(t.TempDir(), "missing"), Old: "a", New: "b"}, nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = EditFile(t.Context(), EditRequest{Path: p, Old: "", New: "b"}, nil)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestEditCRLF(t *testing.T) {
	p := writeFile(t, t.TempDir(), "f.txt", "one\r\ntwo\r\nthree\r\n", 0o644)
	rep, err := EditFile(t.Context(), EditRequest{Path: p, Old: "one\ntwo\n", New: "uno\ndos\nmore\n"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Replacements)
	assert.Equal(t, "uno\r\ndos\r\nmore\r\nthree\r\n", read(t, p))

	// an LF file gets LF, whatever new says
	q := writeFile(t, t.TempDir(), "g.txt", "one\ntwo\n", 0o644)
	_, err = EditFile(t.Context(), EditRequest{Path: q, Old: "one\r\n", New: "uno\r\nmas\r\n"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "uno\nmas\ntwo\n", read(t, q))
}

// TestEditIfMatch: a writer after the client read the file makes the
// edit fail with its ETag; and a writer between the edit's own read and
// its rename makes it fail too, with the writer's content kept.
func TestEditIfMatch(t *testing.T) {
	p := writeFile(t, t.TempDir(), "f", "v1\n", 0o644)
	seen := etagOf(t, p)
	require.NoError(t, os.WriteFile(p, []byte("v1 changed\n"), 0o644))
	_, err := EditFile(t.Context(), EditRequest{Path: p, Old: "v1", New: "v2", IfMatch: seen}, nil)
	assert.ErrorIs(t, err, ErrStale)
	assert.Equal(t, "v1 changed\n", read(t, p))

	rep, err := EditFile(t.Context(), EditRequest{Path: p, Old: "v1", New: "v2", IfMatch: etagOf(t, p)}, nil)
	require.NoError(t, err)
	assert.Equal(t, etagOf(t, p), rep.ETag)

	_, err = editFile(t.Context(), EditRequest{Path: p, Old: "v2", New: "v3"}, nil, func() {
		require.NoError(t, os.WriteFile(p, []byte("v2 by another writer\n"), 0o644))
	})
	assert.ErrorIs(t, err, ErrStale)
	assert.Equal(t, "v2 by another writer\n", read(t, p), "the other writer's content is not clobbered")
	ents, err := os.ReadDir(filepath.Dir(p))
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file is left")
}

// TestEditNoPartialRead: readers of a 50 MiB file being edited see the
// old content or the new one, whole, never a mix or a part.
func TestEditNoPartialRead(t *testing.T) {
	oldContent := bytes.Repeat([]byte("0123456789abcdef"), 50<<20/16)
	copy(oldContent[len(oldContent)/2:], "MARKER")
	p := writeFile(t, t.TempDir(), "big", string(oldContent), 0o644)
	newContent := bytes.Replace(oldContent, []byte("MARKER"), []byte("EDITED"), 1)

	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads, bad atomic.Int64
	wg.Add(1)
	go func() { // readLoop runs in its own goroutine; it ends when done is closed
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(p)
			if err != nil || !(bytes.Equal(b, oldContent) || bytes.Equal(b, newContent)) {
				bad.Add(1)
			}
			reads.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return reads.Load() > 0 }, 10*time.Second, time.Millisecond)
	for i := 0; i < 3; i++ {
		from, to := "MARKER", "EDITED"
		if i%2 == 1 {
			from, to = to, from
		}
		_, err := EditFile(t.Context(), EditRequest{Path: p, Old: from, New: to}, nil)
		require.NoError(t, err)
	}
	close(done)
	wg.Wait()
	assert.Zero(t, bad.Load(), "a reader saw a partial or mixed file")
	assert.Greater(t, reads.Load(), int64(1))
	assert.True(t, strings.Contains(read(t, p), "EDITED"))

	// The diff of a 50 MiB line is cut, not 100 MiB.
	rep, err := EditFile(t.Context(), EditRequest{Path: p, Old: "EDITED", New: "MARKER"}, nil)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rep.Diff), maxDiffBytes+len(diffCut))
	assert.True(t, strings.HasSuffix(rep.Diff, diffCut))
}
