package search

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// page runs req page by page (max results per page) and returns every
// match, in order, with the first page's reply.
func page(t *testing.T, s *Searcher, req GrepRequest, max int) ([]Match, *GrepReply) {
	t.Helper()
	all := []Match{}
	var first *GrepReply
	req.MaxResults = max
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100_000, "the cursor does not move on")
		rep, err := s.Grep(t.Context(), req)
		require.NoError(t, err)
		if first == nil {
			first = rep
		}
		require.LessOrEqual(t, len(rep.Matches), max)
		all = append(all, rep.Matches...)
		if rep.StoppedBy == StoppedEnd {
			assert.False(t, rep.Truncated)
			assert.Empty(t, rep.Cursor)
			return all, first
		}
		require.Equal(t, StoppedMaxResults, rep.StoppedBy)
		require.True(t, rep.Truncated)
		require.NotEmpty(t, rep.Cursor)
		req.Cursor = rep.Cursor
	}
}

// TestCursorPagesEveryCase: for each of the engines' requests, pages of
// one and of two matches give, together, exactly the one-page answer.
func TestCursorPagesEveryCase(t *testing.T) {
	root := fixture(t)
	t.Chdir(root)
	for ename, s := range engines() {
		for name, req := range grepCases(root) {
			t.Run(ename+"/"+name, func(t *testing.T) {
				if strings.HasSuffix(req.Path, "long.txt") {
					t.Skip("one match: nothing to page")
				}
				req.MaxResults = 100_000
				if req.Path == "" {
					// Each page reads the tree again: leave out the 1 MiB line,
					// which the race detector makes slow to match.
					req.Exclude = append(req.Exclude, "long.txt")
				}
				whole, err := s.Grep(t.Context(), req)
				require.NoError(t, err)
				for _, n := range []int{1, 3} {
					got, _ := page(t, s, req, n)
					assert.Equal(t, asJSON(t, whole.Matches), asJSON(t, got), "pages of %d", n)
				}
			})
		}
	}
}

// TestNodeModulesProof: in a tree of 20,000 files, 15,000 of them in a
// node_modules, a word found only outside it is found in full, ten at a
// time, each match exactly once; node_modules is pruned and counted, and
// searched when the defaults are off.
func TestNodeModulesProof(t *testing.T) {
	root := t.TempDir()
	want := map[string]bool{}
	type file struct{ rel, content string }
	var fs []file
	for i := range 15_000 {
		fs = append(fs, file{fmt.Sprintf("node_modules/pkg%03d/f%02d.js", i/100, i%100), "module.exports = 1 // nmword\n"})
	}
	for i := range 5_000 {
		rel, content := fmt.Sprintf("src/d%02d/f%03d.go", i/100, i%100), "nothing here\n"
		if i%20 == 0 {
			content = "x\nthe findme word\ny\n"
			want[filepath.Join(root, rel)] = true
		}
		fs = append(fs, file{rel, content})
	}
	made := map[string]bool{}
	for _, f := range fs {
		p := filepath.Join(root, f.rel)
		if d := filepath.Dir(p); !made[d] {
			require.NoError(t, os.MkdirAll(d, 0o755))
			made[d] = true
		}
		require.NoError(t, os.WriteFile(p, []byte(f.content), 0o644))
	}
	require.Len(t, want, 250)
	for ename, s := range engines() {
		t.Run(ename, func(t *testing.T) {
			all, first := page(t, s, GrepRequest{Pattern: "findme", Path: root}, 10)
			seen := map[string]int{}
			for _, m := range all {
				seen[m.Path]++
				assert.Equal(t, 2, m.Line)
			}
			assert.Len(t, all, 250)
			for p := range want {
				assert.Equal(t, 1, seen[p], "%s found exactly once", p)
			}
			assert.Equal(t, 1, first.Skipped.Excluded, "node_modules is pruned, and counted once")
			assert.Equal(t, 10, len(first.Matches))

			rep, err := s.Grep(t.Context(), GrepRequest{Pattern: "nmword", Path: root, ExcludeDefaults: new(false), MaxResults: 20_000})
			require.NoError(t, err)
			assert.Len(t, rep.Matches, 15_000)
			assert.Equal(t, 0, rep.Skipped.Excluded)
			assert.Equal(t, 20_000, rep.FilesScanned)
			assert.Empty(t, rep.ExcludedByDefault)
		})
	}
}

// TestTimeout: a search cut by its timeout answers with what it found and
// a cursor from which the rest follows, with nothing repeated or lost.
func TestTimeout(t *testing.T) {
	root := t.TempDir()
	for i := range 300 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d", i)), []byte("a hit\nmiss\nhit again\n"), 0o644))
	}
	for ename, s := range engines() {
		t.Run(ename, func(t *testing.T) {
			whole, err := s.Grep(t.Context(), GrepRequest{Pattern: "hit", Path: root, MaxResults: 1000})
			require.NoError(t, err)
			require.Len(t, whole.Matches, 600)
			var got []Match
			req := GrepRequest{Pattern: "hit", Path: root, MaxResults: 1000, Timeout: 1e-9}
			timeouts := 0
			for range 100_000 {
				rep, err := s.Grep(t.Context(), req)
				require.NoError(t, err)
				got = append(got, rep.Matches...)
				if rep.StoppedBy == StoppedEnd {
					break
				}
				timeouts++
				assert.Equal(t, StoppedTimeout, rep.StoppedBy)
				assert.True(t, rep.Truncated)
				require.NotEmpty(t, rep.Cursor)
				req.Cursor = rep.Cursor
				req.Timeout = 0.002 * float64(timeouts%5) // some pages get somewhere
				if req.Timeout == 0 {
					req.Timeout = 1e-9
				}
			}
			assert.Positive(t, timeouts)
			assert.Equal(t, asJSON(t, whole.Matches), asJSON(t, got))
		})
	}
}
