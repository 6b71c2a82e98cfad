package checkpoint

import (
	"cmp"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/internal/beneath"
)

// scanWorkers bounds the directories read at once beyond the caller's
// own: a scan is a stat per file, cheap but many, as git's preloaded
// index does them on a few threads.
const scanWorkers = 3

// scan walks root and returns its files and links, and its directories,
// each sorted by Rel, leaving out the excluded. Files have no SHA256 yet.
// Anything else (pipes, sockets, devices) is skipped, and so is what is
// gone meanwhile or unreadable below root. Directories are read a few at
// once, each through its own handle: a file is one fstatat(2) relative
// to it, no path walked again, and no link followed. Each directory's
// names are sorted as their paths sort (a directory's name with its "/"),
// so that the files come out in order without sorting them all again.
func scan(t *tree, extra []string) (files, dirs []Entry, err error) {
	w := &walker{t: t, extra: extra, sem: make(chan struct{}, scanWorkers)}
	top := &dirNode{}
	if err := w.dir("", top); err != nil {
		return nil, nil, err
	}
	w.wg.Wait()
	files = make([]Entry, 0, w.files.Load())
	dirs = make([]Entry, 0, w.dirs.Load())
	files, dirs = top.flatten(files, dirs)
	slices.SortFunc(dirs, byRel) // "a" < "a.b" < "a/c": not the files' order
	return files, dirs, nil
}

func byRel(a, b Entry) int { return strings.Compare(a.Rel, b.Rel) }

// walker is one scan's state.
type walker struct {
	t           *tree
	extra       []string
	sem         chan struct{} // a slot per directory read in a goroutine of its own
	wg          sync.WaitGroup
	files, dirs atomic.Int64 // how many of each were found
}

// dirNode is what one directory holds, in order: ents[i] is a
// subdirectory if kids[i] is not nil.
type dirNode struct {
	ents []Entry
	kids []*dirNode
}

// flatten appends n's files, and those of its subdirectories in their
// place, to files, and its directories to dirs.
func (n *dirNode) flatten(files, dirs []Entry) ([]Entry, []Entry) {
	for i := range n.ents {
		if k := n.kids[i]; k != nil {
			dirs = append(dirs, n.ents[i])
			files, dirs = k.flatten(files, dirs)
		} else {
			files = append(files, n.ents[i])
		}
	}
	return files, dirs
}

// dir reads the directory rel ("" for the root) into n, and then its
// subdirectories: in a goroutine of their own while sem has room, else in
// this one. No link is followed below the root (see tree).
func (w *walker) dir(rel string, n *dirNode) error {
	f, err := w.t.openDir(rel)
	if err != nil {
		return err
	}
	err = w.read(f, rel, n)
	f.Close()
	if err != nil && rel == "" {
		return err
	}
	for i, k := range n.kids {
		if k == nil {
			continue
		}
		select {
		case w.sem <- struct{}{}:
			w.wg.Add(1)
			go w.dirAsync(n.ents[i].Rel, k)
		default:
			_ = w.dir(n.ents[i].Rel, k) // gone meanwhile, or unreadable: not recorded
		}
	}
	return nil
}

// dirAsync is dir in a goroutine of its own, holding a slot of sem.
//
// dirAsync runs in its own goroutine; it ends when the directory and
// those below it that it took are read. scan waits for it.
func (w *walker) dirAsync(rel string, n *dirNode) {
	defer w.wg.Done()
	defer func() { <-w.sem }()
	_ = w.dir(rel, n)
}

// read stats the entries of directory f, rel, into n, in order, with a
// node for each subdirectory not excluded.
func (w *walker) read(f *os.File, rel string, n *dirNode) error {
	des, err := f.ReadDir(-1) // the types come with the names: no stat yet
	if err != nil {
		return err
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return cmpKey(a.Name(), a.IsDir(), b.Name(), b.IsDir()) })
	fd := int(f.Fd())
	n.ents = make([]Entry, 0, len(des))
	n.kids = make([]*dirNode, 0, len(des))
	var nf, nd int64
	for _, de := range des {
		name := de.Name()
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		if excluded(r, de.IsDir(), w.extra) {
			continue // before its stat: node_modules is no fstatat
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		typ := st.Mode & unix.S_IFMT
		if typ == unix.S_IFDIR != de.IsDir() {
			continue // replaced since it was listed, out of its place in the order
		}
		e := Entry{Rel: r, Mode: st.Mode & 0o7777, MTime: st.Mtim.Nano(), UID: st.Uid, GID: st.Gid}
		var kid *dirNode
		switch typ {
		case unix.S_IFDIR:
			kid = &dirNode{}
			nd++
		case unix.S_IFREG:
			e.Size = st.Size
			nf++
		case unix.S_IFLNK:
			if e.Link, err = beneath.Readlink(fd, name); err != nil {
				continue
			}
			nf++
		default:
			continue
		}
		n.ents = append(n.ents, e)
		n.kids = append(n.kids, kid)
	}
	w.files.Add(nf)
	w.dirs.Add(nd)
	return nil
}

// cmpKey orders two names of one directory as the paths below them sort:
// a directory's name as if it ended in "/".
func cmpKey(a string, aDir bool, b string, bDir bool) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	return cmp.Compare(next(a, n, aDir), next(b, n, bDir))
}

// next is the byte of name at i, "/" past a directory's name, else -1.
func next(name string, i int, dir bool) int {
	switch {
	case i < len(name):
		return int(name[i])
	case dir:
		return '/'
	}
	return -1
}
