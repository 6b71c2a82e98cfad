package search

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
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
	rel  []string    // its path's elements below the root
	de   fs.DirEntry // nil for the root itself
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
	root    string
	opts    walkOptions
	visit   func(entry) error
	ignores []gitignore.Pattern
}

// walk visits the tree at root (a directory).
func (w *walker) walk() error {
	err := w.dir(w.root, nil)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// timedOut is the error of a walk whose context ended; at is where the
// walk was (the next entry it had not looked at).
type timedOut struct {
	at   []string
	line int // the line of at the search resumes after
}

func (t *timedOut) Error() string { return "search timed out" }

func (w *walker) dir(abs string, rel []string) error {
	ents, err := os.ReadDir(abs)
	if err != nil && len(rel) == 0 && len(ents) == 0 {
		return err // the root itself: the caller reports it
	}
	if err != nil {
		if verr := w.visit(entry{kind: entUnreadable, abs: abs, rel: rel, from: -1}); verr != nil {
			return verr
		}
		if len(ents) == 0 {
			return nil
		}
	}
	mark := len(w.ignores)
	if w.opts.gitignore {
		w.readIgnores(abs, rel)
	}
	defer func() { w.ignores = w.ignores[:mark] }()
	for _, de := range ents {
		if err := w.one(abs, rel, de); err != nil {
			return err
		}
	}
	return nil
}

// one looks at one entry of a directory. The order of the checks is the
// contract: the cursor, excludes (counted), hidden names and ignore files
// (not counted), then what the entry is.
func (w *walker) one(dirAbs string, dirRel []string, de fs.DirEntry) error {
	name := de.Name()
	rel := append(dirRel[:len(dirRel):len(dirRel)], name)
	isDir := de.IsDir()
	from := -1
	abs := filepath.Join(dirAbs, name)
	if w.opts.after != nil {
		c := compareRel(rel, w.opts.after.rel)
		switch {
		case c == 0:
			from = w.opts.after.line
		case c < 0 && isDir && isPrefix(rel, w.opts.after.rel):
			return w.dir(abs, rel) // it holds the cursor: visited on the page before
		case c < 0:
			return nil
		}
	}
	if err := w.ctx.Err(); err != nil {
		return &timedOut{at: rel, line: max(from, 0)}
	}
	e := entry{abs: abs, rel: rel, de: de, from: from}
	relStr := joinRel(rel)
	if matchAny(w.opts.excludes, relStr, name, isDir) {
		e.kind = entExcluded
		return w.visit(e)
	}
	if !w.opts.hidden && name[0] == '.' {
		return nil
	}
	if gitignore.Ignored(w.ignores, relStr, isDir) {
		return nil
	}
	switch t := de.Type(); {
	case isDir:
		e.kind = entDir
		if err := w.visit(e); err != nil {
			return err
		}
		return w.dir(e.abs, rel)
	case t&fs.ModeSymlink != 0:
		e.kind = entLink
	case !t.IsRegular():
		e.kind = entUnreadable
	default:
		if len(w.opts.includes) > 0 && !matchAny(w.opts.includes, relStr, name, false) {
			return nil
		}
		e.kind = entFile
	}
	return w.visit(e)
}

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
}

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
		gs = append(gs, g)
	}
	return gs, nil
}

func (g glob) match(rel, name string, isDir bool) bool {
	if g.dirOnly && !isDir {
		return false
	}
	s := name
	if g.full {
		s = rel
	}
	ok, _ := doublestar.Match(g.pattern, s) // validated in compileGlobs
	return ok
}

func matchAny(gs []glob, rel, name string, isDir bool) bool {
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
