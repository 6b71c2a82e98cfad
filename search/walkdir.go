package search

import (
	"errors"
	"io/fs"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/gitignore"
)

// maxHeldDirs is how deep the walk keeps each directory on its path open
// (so that its entries are stat'ed and entered relative to it); below
// that depth a directory is closed once listed, and its entries are
// reached by path, so a deep tree costs no more descriptors than this.
const maxHeldDirs = 64

// walk visits the tree at root (a directory).
func (w *walker) walk() error {
	w.buf = make([]byte, direntBufSize)
	fd, err := unix.Open(w.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: w.root, Err: err}
	}
	err = w.dir(fd, w.root, nil)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// dir walks the directory at abs, open at fd, which it closes.
func (w *walker) dir(fd int, abs string, rel []string) error {
	ents, err := readDir(fd, w.buf)
	held := fd
	if len(rel) >= maxHeldDirs {
		unix.Close(fd)
		held = -1
	} else {
		defer unix.Close(fd)
	}
	if err != nil && len(rel) == 0 && len(ents) == 0 {
		return &fs.PathError{Op: "readdirent", Path: abs, Err: err} // the root itself: the caller reports it
	}
	if err != nil {
		if verr := w.visit(entry{kind: entUnreadable, abs: abs, rel: rel, typ: unix.DT_DIR, dirfd: -1, from: -1}); verr != nil {
			return verr
		}
		if len(ents) == 0 {
			return nil
		}
	}
	mark := len(w.ignores)
	if w.opts.gitignore && hasIgnoreFile(ents) {
		w.readIgnores(abs, rel)
	}
	defer func() { w.ignores = w.ignores[:mark] }()
	for _, de := range ents {
		if err := w.one(held, abs, rel, de); err != nil {
			return err
		}
	}
	return nil
}

// enter walks the directory e, or counts it as unreadable if it cannot
// be opened.
func (w *walker) enter(e entry) error {
	fd, err := openDir(e.dirfd, e.name, e.abs)
	if err != nil {
		return w.visit(entry{kind: entUnreadable, abs: e.abs, rel: e.rel, typ: unix.DT_DIR, dirfd: -1, from: -1})
	}
	return w.dir(fd, e.abs, e.rel)
}

// one looks at one entry of the directory at dirAbs, open at dirfd (-1:
// not held). The order of the checks is the contract: the cursor,
// excludes (counted), hidden names and ignore files (not counted), then
// what the entry is.
func (w *walker) one(dirfd int, dirAbs string, dirRel []string, de dirEnt) error {
	name := de.name
	rel := append(dirRel[:len(dirRel):len(dirRel)], name)
	e := entry{abs: joinPath(dirAbs, name), rel: rel, name: name, typ: de.typ, dirfd: dirfd, from: -1}
	if e.typ == unix.DT_UNKNOWN {
		t, err := typeOf(dirfd, name, e.abs)
		if err != nil {
			return nil // gone since the directory was read
		}
		e.typ = t
	}
	isDir := e.typ == unix.DT_DIR
	if w.opts.after != nil {
		c := compareRel(rel, w.opts.after.rel)
		switch {
		case c == 0:
			e.from = w.opts.after.line
		case c < 0 && isDir && isPrefix(rel, w.opts.after.rel):
			return w.enter(e) // it holds the cursor: visited on the page before
		case c < 0:
			return nil
		}
	}
	if err := w.ctx.Err(); err != nil {
		return &timedOut{at: rel, line: max(e.from, 0)}
	}
	if matchAny(w.opts.excludes, rel, name, isDir) {
		e.kind = entExcluded
		return w.visit(e)
	}
	if !w.opts.hidden && name[0] == '.' {
		return nil
	}
	if len(w.ignores) > 0 && gitignore.Ignored(w.ignores, joinRel(rel), isDir) {
		return nil
	}
	switch {
	case isDir:
		e.kind = entDir
		if err := w.visit(e); err != nil {
			return err
		}
		return w.enter(e)
	case e.typ == unix.DT_LNK:
		e.kind = entLink
	case e.typ != unix.DT_REG:
		e.kind = entUnreadable
	default:
		if len(w.opts.includes) > 0 && !matchAny(w.opts.includes, rel, name, false) {
			return nil
		}
		e.kind = entFile
	}
	return w.visit(e)
}

// lstat lstat's the entry, relative to its directory when that is open.
func (e *entry) lstat(st *unix.Stat_t) error { return lstatAt(e.dirfd, e.name, e.abs, st) }

// joinPath is filepath.Join(dir, name) for a clean dir and a name of a
// directory entry (no "/", not "." or ".."), without Join's cleaning.
func joinPath(dir, name string) string {
	if dir == "/" {
		return dir + name
	}
	return dir + "/" + name
}

// hasIgnoreFile reports whether a directory's sorted listing holds a
// .gitignore or an .ignore: only then are they opened, rather than two
// failed opens for every directory of a tree that has none.
func hasIgnoreFile(ents []dirEnt) bool {
	for _, name := range [...]string{".gitignore", ".ignore"} {
		if _, ok := slices.BinarySearchFunc(ents, name, func(e dirEnt, n string) int { return strings.Compare(e.name, n) }); ok {
			return true
		}
	}
	return false
}
