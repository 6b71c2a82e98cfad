package gitignore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// caseTree is one generated case: ignore files by directory, and paths
// (slash-separated, below the case's directory) with whether each is a
// directory.
type caseTree struct {
	ignores map[string][]string // directory ("" for the case's own) → lines of its .gitignore
	paths   map[string]bool
}

// Names and pattern pieces are drawn from small sets, so that patterns
// often match and the corners of git's rules (escapes, classes, "**",
// anchoring, trailing spaces) meet paths that test them.
var (
	genNames  = []string{"a", "b", "ab", "ba", "a.b", "x y", ".h", "#c", "!d", "[a]", "*", "é", "a-b", "b ", "aa", "a1", "7"}
	genTokens = []string{"a", "b", "ab", ".h", "#c", "x y", "é", "*", "**", "?", "??", "[ab]", "[!a]", "[^b]",
		"[a-c]", "[]a]", "[[:alpha:]]", "[[:punct:]]", "[[:digit:]]", "[[:alnum:]]", "[[:space:]]", "[[:bogus:]]", "[a", "\\*", "\\[a]",
		"\\#", "\\!", "\\ ", "a-", "[é]", "\\", "[[:", "[a-]", "[\\]]"}
)

// genPattern makes one line: from random pieces, or, half the time, from
// one of below (paths below the ignore file's directory) with some of
// its elements or bytes made wild, so that it is likely to match.
func genPattern(rng *rand.Rand, below []string) string {
	var b strings.Builder
	if rng.IntN(5) == 0 {
		b.WriteString("!")
	}
	if rng.IntN(5) == 0 {
		b.WriteString("/")
	}
	if len(below) > 0 && rng.IntN(2) == 0 {
		b.WriteString(wilden(rng, below[rng.IntN(len(below))]))
	} else {
		for i := range 1 + rng.IntN(3) {
			if i > 0 {
				b.WriteString("/")
			}
			for range 1 + rng.IntN(2) {
				b.WriteString(genTokens[rng.IntN(len(genTokens))])
			}
		}
	}
	if rng.IntN(5) == 0 {
		b.WriteString("/")
	}
	switch rng.IntN(10) {
	case 0:
		b.WriteString("  ")
	case 1:
		b.WriteString("\\  ")
	case 2:
		b.WriteString("\t")
	}
	return b.String()
}

// wilden turns some elements of path into "*" or "**", and some bytes of
// the others into "?", a class or an escape.
func wilden(rng *rand.Rand, path string) string {
	els := strings.Split(path, "/")
	for i, e := range els {
		switch rng.IntN(8) {
		case 0:
			els[i] = "*"
		case 1:
			els[i] = "**"
		case 2:
			els[i] = []string{"**/", "**\\/", "*/"}[rng.IntN(3)] + e
		case 3, 4:
			j := rng.IntN(len(e))
			repl := []string{"?", "[" + e[j:j+1] + "]", "\\" + e[j:j+1], "[!" + e[j:j+1] + "]", "*"}[rng.IntN(5)]
			els[i] = e[:j] + repl + e[j+1:]
		}
	}
	var b strings.Builder
	for i, e := range els {
		if i > 0 {
			// Now and then a byte that must not match the "/" of a path.
			b.WriteString([]string{"/", "/", "/", "/", "?", "[/]", "[!a]", "*"}[rng.IntN(8)])
		}
		b.WriteString(e)
	}
	return b.String()
}

func genCase(rng *rand.Rand) caseTree {
	c := caseTree{ignores: map[string][]string{}, paths: map[string]bool{}}
	for range 25 {
		var els []string
		for range 1 + rng.IntN(5) {
			els = append(els, genNames[rng.IntN(len(genNames))])
		}
		for i := 1; i < len(els); i++ {
			c.paths[strings.Join(els[:i], "/")] = true
		}
		p := strings.Join(els, "/")
		if _, seen := c.paths[p]; !seen {
			c.paths[p] = rng.IntN(3) == 0
		}
	}
	dirs := []string{""}
	for p, isDir := range c.paths {
		if isDir {
			dirs = append(dirs, p)
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		if d != "" && rng.IntN(3) != 0 {
			continue
		}
		var below []string
		for p := range c.paths {
			if rest, ok := strings.CutPrefix(p, d+"/"); ok || d == "" {
				below = append(below, cond(d == "", p, rest))
			}
		}
		slices.Sort(below)
		var lines []string
		for range 1 + rng.IntN(5) {
			lines = append(lines, genPattern(rng, below))
		}
		c.ignores[d] = lines
	}
	return c
}

func cond[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// writeCase makes the case's files and directories under dir.
func writeCase(t *testing.T, dir string, c caseTree) {
	t.Helper()
	for p, isDir := range c.paths {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if isDir {
			require.NoError(t, os.MkdirAll(full, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, nil, 0o644))
	}
	for d, lines := range c.ignores {
		// A file's paths never clash with .gitignore: no generated name is it.
		content := strings.Join(lines, "\n") + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(d), ".gitignore"), []byte(content), 0o644))
	}
}

// ignoredAsWalk says whether path (below root, whose directory's own
// elements are prefix) is ignored the way a walk finds it: each
// ancestor directory in turn, with the patterns of the ignore files
// above it, and nothing below an ignored directory.
func ignoredAsWalk(t *testing.T, c caseTree, prefix, path string) bool {
	els := strings.Split(path, "/")
	var ps []Pattern
	for i := range els {
		dir := strings.Join(els[:i], "/")
		if lines, ok := c.ignores[dir]; ok {
			var err error
			ps, err = Read(strings.NewReader(strings.Join(lines, "\n")), append([]string{prefix}, els[:i]...), ps)
			require.NoError(t, err)
		}
		sub := strings.Join(els[:i+1], "/")
		if Ignored(ps, prefix+"/"+sub, c.paths[sub]) {
			return true
		}
	}
	return false
}

// TestAsGit: for many generated ignore files, nested at several depths,
// and paths, Ignored (as a walk uses it) says what git check-ignore
// --no-index says.
func TestAsGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not on PATH")
	}
	root := t.TempDir()
	home := t.TempDir() // no global excludes file or configuration
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd := exec.Command(git, "init", "-q", root)
	cmd.Env = env
	require.NoError(t, cmd.Run())

	rng := rand.New(rand.NewPCG(1, 2))
	const cases = 120
	trees := make([]caseTree, cases)
	var stdin bytes.Buffer
	for i := range trees {
		trees[i] = genCase(rng)
		name := fmt.Sprintf("c%03d", i)
		writeCase(t, filepath.Join(root, name), trees[i])
		for p := range trees[i].paths {
			stdin.WriteString(name + "/" + p + "\x00")
		}
	}
	cmd = exec.Command(git, "-C", root, "check-ignore", "--no-index", "--stdin", "-z")
	cmd.Env, cmd.Stdin = env, &stdin
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 { // 1: nothing ignored
		require.NoError(t, err)
	}
	byGit := map[string]bool{}
	for p := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		byGit[p] = true
	}

	checked, ignored := 0, 0
	for i, c := range trees {
		name := fmt.Sprintf("c%03d", i)
		for p := range c.paths {
			want := byGit[name+"/"+p]
			if !assert.Equal(t, want, ignoredAsWalk(t, c, name, p), "%s/%s; ignore files: %q", name, p, c.ignores) {
				continue
			}
			checked++
			if want {
				ignored++
			}
		}
	}
	t.Logf("%d paths agree with git, %d of them ignored", checked, ignored)
	// The generator must reach both answers often, or the test proves little.
	assert.Greater(t, ignored, checked/10)
	assert.Greater(t, checked-ignored, checked/10)
}
