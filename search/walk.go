package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/sandbox-executor/sandbox-executor/gitignore"
)

// walkOptions are what a walk prunes and where it starts.
type walkOptions struct {
	hidden    bool     // enter and report names starting with "."
	gitignore bool     // honour .gitignore and .ignore
	excludes  []glob   // default and request excludes: pruned and counted
	includes  []glob   // files must match one, if any are given
	after     position // the cursor: entries before it are not visited
}

// kind is what a walk reports about an entry.
type kind int

const (
	entFile       kind = iota // a regular file to look at
	entDir                    // a directory about to be entered
	entExcluded               // pruned by an exclude
	entUnreadable             // a directory that could not be read, or a special file
	entLink                   // a symbolic link, never followed
)

// entry is one thing the walk met, in walk order.
type entry struct {
	kind kind
	abs  string
	rel  []string // its path's elements below the root
	name string   // its name in its directory
	// typ is its type as its directory entry gives it (unix.DT_DIR,
	// DT_REG, DT_LNK or another for a special file); DT_DIR for a
	// directory that could not be read.
	typ uint8
	// dirfd is the open directory that holds it, for lstat (see
	// entry.lstat), valid during visit only; -1 if the walk holds none.
	dirfd int
	// from is, for the entry the cursor names, the line the search
	// resumes after; -1 for every other entry.
	from int
}

// errStop ends a walk early without an error to report.
var errStop = errors.New("stop")

// walker walks one directory tree; visit sees every entry in order and
// may return errStop (or another error) to end the walk.
type walker struct {
	ctx     context.Context
	buf     []byte // getdents64's scratch, one for the whole walk
	root    string
	opts    walkOptions
	visit   func(entry) error
	ignores []gitignore.Pattern
}

// timedOut is the error of a walk whose context ended; at is where the
// walk was (the next entry it had not looked at).
type timedOut struct {
	at   []string
	line int // the line of at the search resumes after
}

func (t *timedOut) Error() string { return "search timed out" }

// readIgnores adds the patterns of dir's .gitignore, then its .ignore
// (which, read later, takes precedence, as in rg). Neither is followed
// if it is a symbolic link, as git does not.
func (w *walker) readIgnores(abs string, rel []string) {
	for _, name := range [...]string{".gitignore", ".ignore"} {
		f, err := os.OpenFile(filepath.Join(abs, name), os.O_RDONLY|syscallNoFollow, 0)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			// A read error keeps the patterns before it, as a shorter file would.
			w.ignores, _ = gitignore.Read(f, rel, w.ignores)
		}
		f.Close()
	}
}

// glob is a gitignore-style glob: without a "/" it matches an entry's
// name at any depth, with one the path relative to the searched path; a
// trailing "/" makes it match directories only.
type glob struct {
	pattern string
	full    bool // match the relative path rather than the name
	dirOnly bool
	// fast, unless fastNone, is the whole test of a name glob whose
	// pattern needs no matcher: lit is the name, or its suffix.
	fast fastGlob
	lit  string
}

// fastGlob is how a glob that needs no matcher matches a name.
type fastGlob int

const (
	fastNone   fastGlob = iota // doublestar.Match
	fastAll                    // "*" or "**": any name
	fastExact                  // a literal: the name is lit
	fastSuffix                 // "*" then a literal: the name ends with lit
)

func compileGlobs(patterns []string) ([]glob, error) {
	var gs []glob
	for _, p := range patterns {
		g := glob{}
		if strings.HasSuffix(p, "/") && len(p) > 1 {
			g.dirOnly, p = true, strings.TrimSuffix(p, "/")
		}
		if strings.Contains(p, "/") {
			g.full, p = true, strings.TrimPrefix(p, "/")
		}
		if p == "" || !doublestar.ValidatePattern(p) {
			return nil, invalid("bad glob %q", p)
		}
		g.pattern = p
		g.nameOnly()
		gs = append(gs, g)
	}
	return gs, nil
}

// nameOnly makes g a test of names where that is the same test: "**/P",
// where P has no "/" and no class or brace (whose "*" and "?" cannot
// match a "/"), matches a path exactly when P matches its last element;
// and it finds the patterns that need no matcher ("*.go", "node_modules").
func (g *glob) nameOnly() {
	p := g.pattern
	if g.full {
		rest, ok := strings.CutPrefix(p, "**/")
		if !ok || strings.ContainsAny(rest, "/[{\\") {
			return
		}
		g.full, g.pattern, p = false, rest, rest
	}
	switch {
	case p == "*" || p == "**":
		g.fast = fastAll
	case !strings.ContainsAny(p, "*?[]{}\\"):
		g.fast, g.lit = fastExact, p
	case p[0] == '*' && !strings.ContainsAny(p[1:], "*?[]{}\\"):
		g.fast, g.lit = fastSuffix, p[1:]
	}
}

// match reports whether g matches the entry at rel, named name. The
// relative path is joined only for a glob that needs it.
func (g glob) match(rel []string, name string, isDir bool) bool {
	if g.dirOnly && !isDir {
		return false
	}
	switch {
	case g.full:
		ok, _ := doublestar.Match(g.pattern, joinRel(rel)) // validated in compileGlobs
		return ok
	case g.fast == fastAll:
		return true
	case g.fast == fastExact:
		return name == g.lit
	case g.fast == fastSuffix:
		return strings.HasSuffix(name, g.lit)
	}
	ok, _ := doublestar.Match(g.pattern, name)
	return ok
}

func matchAny(gs []glob, rel []string, name string, isDir bool) bool {
	for _, g := range gs {
		if g.match(rel, name, isDir) {
			return true
		}
	}
	return false
}

// compareRel orders two relative paths as the walk meets them: element
// by element, each by its bytes, a directory before what it holds.
func compareRel(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// isPrefix reports whether the directory dir holds p (at any depth).
func isPrefix(dir, p []string) bool {
	if len(dir) >= len(p) {
		return false
	}
	for i := range dir {
		if dir[i] != p[i] {
			return false
		}
	}
	return true
}

// hasNUL reports whether p's first 8 KiB hold a NUL: a binary file.
func hasNUL(p []byte) bool { return bytes.IndexByte(p[:min(len(p), binaryPrefix)], 0) >= 0 }

// binaryPrefix is how much of a file decides whether it is binary.
const binaryPrefix = 8 << 10

func joinRel(rel []string) string { return strings.Join(rel, "/") }
