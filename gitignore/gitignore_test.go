package gitignore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWildmatch(t *testing.T) {
	for _, c := range []struct {
		pattern, text  string
		pathname, want bool
	}{
		{"*.go", "a.go", true, true},
		{"*.go", "a/b.go", true, false},
		{"*.go", "a/b.go", false, true},
		{"a/**/b", "a/b", true, true},
		{"a/**/b", "a/x/y/b", true, true},
		{"a/**", "a/x/y", true, true},
		{"a/**", "a", true, false},
		{"**/b", "b", true, true},
		{"**\\/b", "b", true, false}, // an escaped slash is no boundary for "may match nothing"
		{"**\\/b", "x/b", true, true},
		{"a**b", "a/b", true, false}, // "**" inside an element is "*"
		{"a*/b", "ax/b", true, true},
		{"?", "/", true, false},
		{"?", "é", true, false}, // two bytes
		{"??", "é", true, true},
		{"[é]", "\xa9", true, true},
		{"[]a]", "]", true, true},
		{"[!]a]", "b", true, true},
		{"[^a]", "a", true, false},
		{"[a-c]", "b", true, true},
		{"[a-]", "-", true, true},
		{"[[:digit:]x]", "7", true, true},
		{"[[:bogus:]]", "a", true, false},
		{"[[:]", "[", true, true},
		{"[a", "[a", true, false}, // no "]": nothing matches
		{"[/]", "/", true, false},
		{"\\*", "*", true, true},
		{"\\*", "a", true, false},
		{"a\\", "a", true, false},
		{"*a*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 60), true, false}, // fast: no backtracking blow-up
	} {
		assert.Equal(t, c.want, wildmatch(c.pattern, c.text, c.pathname), "%q ~ %q (pathname %v)", c.pattern, c.text, c.pathname)
	}
}

func TestParsePattern(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
		want Pattern
	}{
		{"# comment", false, Pattern{}},
		{"", false, Pattern{}},
		{"   ", false, Pattern{}},
		{"!", false, Pattern{}},
		{"/", false, Pattern{}},
		{"\\#hash", true, Pattern{glob: "\\#hash"}},
		{" lead", true, Pattern{glob: " lead"}},
		{"trail  ", true, Pattern{glob: "trail"}},
		{"trail\\  ", true, Pattern{glob: "trail\\ "}},
		{"tab\t", true, Pattern{glob: "tab\t"}},
		{"crlf\r", true, Pattern{glob: "crlf"}},
		{"!keep/", true, Pattern{glob: "keep", negate: true, dirOnly: true}},
		{"\\!bang", true, Pattern{glob: "\\!bang"}},
		{"/top", true, Pattern{glob: "top", anchored: true}},
		{"a/b", true, Pattern{glob: "a/b", anchored: true}},
		{"build/", true, Pattern{glob: "build", dirOnly: true}},
		{"nul\x00after", true, Pattern{glob: "nul"}},
	} {
		p, ok := ParsePattern(c.line, nil)
		assert.Equal(t, c.ok, ok, "%q", c.line)
		assert.Equal(t, c.want, p, "%q", c.line)
	}
}

// TestMatchBase: a pattern matches only below its file's directory, an
// anchored one relative to it, an unanchored one by name at any depth.
func TestMatchBase(t *testing.T) {
	anchored, _ := ParsePattern("/x", []string{"sub"})
	name, _ := ParsePattern("x", []string{"sub"})
	dir, _ := ParsePattern("!x/", []string{"sub"})
	assert.Equal(t, Exclude, anchored.Match("sub/x", false))
	assert.Equal(t, NoMatch, anchored.Match("sub/d/x", false))
	assert.Equal(t, NoMatch, anchored.Match("x", false))
	assert.Equal(t, NoMatch, anchored.Match("subx", false))
	assert.Equal(t, Exclude, name.Match("sub/d/x", false))
	assert.Equal(t, NoMatch, name.Match("other/x", false))
	assert.Equal(t, NoMatch, dir.Match("sub/x", false))
	assert.Equal(t, Include, dir.Match("sub/x", true))
}

func TestRead(t *testing.T) {
	long := strings.Repeat("y", MaxLine+10)
	in := "\xef\xbb\xbfbom\r\n#c\n" + long + "\nafter\nlast"
	ps, err := Read(strings.NewReader(in), nil, nil)
	require.NoError(t, err)
	var globs []string
	for _, p := range ps {
		globs = append(globs, p.glob)
	}
	assert.Equal(t, []string{"bom", "after", "last"}, globs)
	assert.True(t, Ignored(ps, "d/after", false))
	assert.False(t, Ignored(ps, "d/other", false))
}
