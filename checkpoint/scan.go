package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
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
// to it, no path walked again, and no link followed.
func scan(root string, extra []string) (files, dirs []Entry, err error) {
	w := &walker{root: root, extra: extra, sem: make(chan struct{}, scanWorkers)}
	if err := w.dir(""); err != nil {
		return nil, nil, err
	}
	w.wg.Wait()
	sort.Slice(w.files, func(i, j int) bool { return w.files[i].Rel < w.files[j].Rel })
	sort.Slice(w.dirs, func(i, j int) bool { return w.dirs[i].Rel < w.dirs[j].Rel })
	return w.files, w.dirs, nil
}

// walker is one scan's state.
type walker struct {
	root  string
	extra []string
	sem   chan struct{} // a slot per directory read in a goroutine of its own
	wg    sync.WaitGroup
	// mu guards files and dirs.
	mu    sync.Mutex
	files []Entry
	dirs  []Entry
}

// dir reads the directory rel ("" for the root) and then its
// subdirectories: in a goroutine of their own while sem has room, else in
// this one. Only the root is opened through a link.
func (w *walker) dir(rel string) error {
	flags := os.O_RDONLY | syscall.O_DIRECTORY
	if rel != "" {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(filepath.Join(w.root, filepath.FromSlash(rel)), flags, 0)
	if err != nil {
		return err
	}
	subdirs, err := w.read(f, rel)
	f.Close()
	if err != nil && rel == "" {
		return err
	}
	for _, d := range subdirs {
		select {
		case w.sem <- struct{}{}:
			w.wg.Add(1)
			go w.dirAsync(d)
		default:
			_ = w.dir(d) // gone meanwhile, or unreadable: not recorded
		}
	}
	return nil
}

// dirAsync is dir in a goroutine of its own, holding a slot of sem.
//
// dirAsync runs in its own goroutine; it ends when the directory and
// those below it that it took are read. scan waits for it.
func (w *walker) dirAsync(rel string) {
	defer w.wg.Done()
	defer func() { <-w.sem }()
	_ = w.dir(rel)
}

// read stats the entries of directory f, rel, records them, and returns
// its subdirectories not excluded.
func (w *walker) read(f *os.File, rel string) ([]string, error) {
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	var files, dirs []Entry
	var subdirs []string
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		typ := st.Mode & unix.S_IFMT
		if excluded(r, typ == unix.S_IFDIR, w.extra) {
			continue
		}
		e := Entry{Rel: r, Mode: st.Mode & 0o7777, MTime: st.Mtim.Nano(), UID: st.Uid, GID: st.Gid}
		switch typ {
		case unix.S_IFDIR:
			dirs = append(dirs, e)
			subdirs = append(subdirs, r)
		case unix.S_IFREG:
			e.Size = st.Size
			files = append(files, e)
		case unix.S_IFLNK:
			if e.Link, err = readlinkat(fd, name); err == nil {
				files = append(files, e)
			}
		}
	}
	w.mu.Lock()
	w.files = append(w.files, files...)
	w.dirs = append(w.dirs, dirs...)
	w.mu.Unlock()
	return subdirs, nil
}

func readlinkat(fd int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", &fs.PathError{Op: "readlinkat", Path: name, Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", errors.New("link target too long")
}
