package search

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rels(root string, es []FoundEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, strings.TrimPrefix(e.Path, root+"/"))
	}
	return out
}

func TestFindFiles(t *testing.T) {
	root := fixture(t)
	s := New("")
	rep, err := s.FindFiles(t.Context(), FindRequest{Path: root, Glob: "**/*.go"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a.go"}, rels(root, rep.Entries)) // sub/deep/y.go is in sub/.ignore
	assert.Equal(t, Skipped{Unreadable: 0, Excluded: 2}, rep.Skipped)
	assert.Equal(t, DefaultExcludes(), rep.ExcludedByDefault)

	rep, err = s.FindFiles(t.Context(), FindRequest{Path: root, Glob: "*.txt", Gitignore: new(false)})
	require.NoError(t, err)
	assert.Equal(t, []string{"a-b/c.txt", "a.b/c.txt", "b.txt", "crlf.txt", "ctx.txt", "empty.txt", "ignored/z.txt",
		"latenul.txt", "long.txt", "nonl.txt", "unicode.txt", "utf8bad.txt"}, rels(root, rep.Entries))

	rep, err = s.FindFiles(t.Context(), FindRequest{Path: root, Type: "dir", Hidden: true})
	require.NoError(t, err)
	assert.Equal(t, []string{".hidden", "a-b", "a.b", "sub", "sub/deep"}, rels(root, rep.Entries))
	for _, e := range rep.Entries {
		assert.Equal(t, "dir", e.Type)
		assert.Zero(t, e.Size)
	}

	rep, err = s.FindFiles(t.Context(), FindRequest{Path: root, Glob: "b.txt"})
	require.NoError(t, err)
	require.Len(t, rep.Entries, 1)
	e := rep.Entries[0]
	fi, err := os.Stat(filepath.Join(root, "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, FoundEntry{Path: filepath.Join(root, "b.txt"), Type: "file", Size: fi.Size(),
		ModTime: fi.ModTime().UTC().Format(time.RFC3339)}, e)
	assert.True(t, strings.HasSuffix(e.ModTime, "Z"))
}

// TestFindPages: pages of any size give the one-page answer.
func TestFindPages(t *testing.T) {
	root := fixture(t)
	s := New("")
	for _, typ := range []string{"file", "dir", "any"} {
		whole, err := s.FindFiles(t.Context(), FindRequest{Path: root, Type: typ, Hidden: true, ExcludeDefaults: new(false)})
		require.NoError(t, err)
		require.Equal(t, StoppedEnd, whole.StoppedBy)
		for _, n := range []int{1, 2, 5} {
			var got []FoundEntry
			req := FindRequest{Path: root, Type: typ, Hidden: true, ExcludeDefaults: new(false), MaxResults: n}
			for range 1000 {
				rep, err := s.FindFiles(t.Context(), req)
				require.NoError(t, err)
				got = append(got, rep.Entries...)
				if rep.StoppedBy == StoppedEnd {
					break
				}
				require.Equal(t, StoppedMaxResults, rep.StoppedBy)
				req.Cursor = rep.Cursor
			}
			assert.Equal(t, rels(root, whole.Entries), rels(root, got), "%s, pages of %d", typ, n)
		}
	}
}

// TestGitignoreAsGit: what the walk leaves out is what git itself
// ignores (git check-ignore), for patterns that trip simpler matchers.
func TestGitignoreAsGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not on PATH")
	}
	root := writeTree(t, map[string]string{
		".gitignore": "*.log\n!keep.log\n/top.txt\nbuild/\ndocs/**/gen\n**/tmp/*.o\n\\#hash\nsp\\ ace\n",
		"a.log":      "", "keep.log": "", "top.txt": "", "sub/top.txt": "",
		"sub/build/x": "", "sub/build.txt": "", "docs/a/b/gen/f": "", "docs/gen": "",
		"x/tmp/y.o": "", "x/tmp/y.c": "", "#hash": "", "sp ace": "",
		"sub/.gitignore": "*.md\n!README.md\n",
		"sub/a.md":       "", "sub/README.md": "", "b.md": "",
		"nested/.ignore": "secret\n",
		"nested/secret":  "",
	})
	rep, err := New("").FindFiles(t.Context(), FindRequest{Path: root, Hidden: true, Type: "any"})
	require.NoError(t, err)
	found := map[string]bool{}
	for _, r := range rels(root, rep.Entries) {
		found[r] = true
	}
	cmd := exec.Command(git, "init", "-q", root)
	require.NoError(t, cmd.Run())
	for _, p := range []string{"a.log", "keep.log", "top.txt", "sub/top.txt", "sub/build/x", "sub/build.txt",
		"docs/a/b/gen/f", "docs/gen", "x/tmp/y.o", "x/tmp/y.c", "#hash", "sp ace", "sub/a.md", "sub/README.md", "b.md"} {
		ignoredByGit := exec.Command(git, "-C", root, "check-ignore", "-q", "--no-index", p).Run() == nil
		assert.Equal(t, !ignoredByGit, found[p], "%s: git ignores it: %v", p, ignoredByGit)
	}
	assert.False(t, found["nested/secret"], ".ignore is honoured")
}

// TestGlobFastPaths: a glob tested without doublestar (a name suffix, a
// name, "**/" before a name glob) matches exactly what doublestar does.
func TestGlobFastPaths(t *testing.T) {
	patterns := []string{"**/*.go", "*.go", "node_modules", "**/node_modules", "*", "**", "/**/x.go",
		"**/*.g?", "**/[ab].go", "**/{a,b}.go", "a/**/*.go", "**/a/*.go", "*.tar.gz", `**/\*.go`, "build/"}
	paths := []string{"x.go", "a/x.go", "a/b/c.go", "a.go", "b.go", ".go", "go", "node_modules", "a/node_modules",
		"a/node_modules/x", "x.gox", "a/b/x.tar.gz", "*.go", "a/*.go", "build", "a/build"}
	for _, p := range patterns {
		gs, err := compileGlobs([]string{p})
		require.NoError(t, err, p)
		for _, rel := range paths {
			for _, isDir := range []bool{false, true} {
				parts := strings.Split(rel, "/")
				name := parts[len(parts)-1]
				want := slowMatch(t, p, rel, name, isDir)
				assert.Equal(t, want, gs[0].match(parts, name, isDir), "glob %q, path %q, dir %v", p, rel, isDir)
			}
		}
	}
}

// slowMatch is what a glob meant before the fast paths: doublestar on
// the name, or on the path for a glob with a "/".
func slowMatch(t *testing.T, p, rel, name string, isDir bool) bool {
	if strings.HasSuffix(p, "/") && len(p) > 1 {
		if !isDir {
			return false
		}
		p = strings.TrimSuffix(p, "/")
	}
	s := name
	if strings.Contains(p, "/") {
		p, s = strings.TrimPrefix(p, "/"), rel
	}
	ok, err := doublestar.Match(p, s)
	require.NoError(t, err)
	return ok
}

// TestFindDeep: below the depth where the walk stops holding each
// directory open, entries are still found, stat'ed and entered.
func TestFindDeep(t *testing.T) {
	parts := make([]string, maxHeldDirs+6)
	for i := range parts {
		parts[i] = "d"
	}
	deep := strings.Join(parts, "/")
	root := writeTree(t, map[string]string{deep + "/x.go": "package x\n", "d/y.go": "package y\n"})
	fds := openFDs(t)
	rep, err := New("").FindFiles(t.Context(), FindRequest{Path: root, Glob: "**/*.go"})
	require.NoError(t, err)
	assert.Equal(t, []string{deep + "/x.go", "d/y.go"}, rels(root, rep.Entries))
	assert.Equal(t, int64(len("package x\n")), rep.Entries[0].Size)
	dirs, err := New("").FindFiles(t.Context(), FindRequest{Path: root, Type: "dir"})
	require.NoError(t, err)
	assert.Len(t, dirs.Entries, len(parts))
	assert.Equal(t, fds, openFDs(t), "the walk closes every directory it opened")
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}
