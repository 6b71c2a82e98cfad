package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/internal/beneath"
)

// Writes find their way one path element at a time, from the file
// descriptor of each directory to the next (openat(2) with O_NOFOLLOW),
// never by handing a whole path to the kernel: a directory, once open,
// stays the directory it was, whoever renames or replaces names on the
// way, so a path checked is the path used (Docker's CVE-2018-15664 is
// what happens otherwise). The symbolic links on the way are read and
// followed here, where trustLink decides which may be.

// maxSteps bounds the work of one resolution: path elements, those of
// the links followed included, and directories made.
const maxSteps = 4096

// maxLinks is how many symbolic links a resolution follows, as Linux's
// open(2) does before ELOOP.
const maxLinks = 40

// walker resolves a path for a write by uid. Its zero value, but for uid,
// is a walk that creates nothing.
type walker struct {
	uid    uint32 // who writes: links of theirs are followed
	create bool   // make missing directories on the way (mode 0755)
	// made are the directories the walk created, outermost first, so
	// that a write that fails can remove them (see removeMade).
	made  []madeDir
	steps int
	links int
}

// madeDir is a directory a walk created: the name in its parent.
type madeDir struct {
	parent *os.File // O_PATH; closed by removeMade or closeMade
	name   string
}

// newWalker returns the walker of a write by o (nil: the agent itself).
func newWalker(o *Owner, create bool) *walker {
	return &walker{uid: uint32(o.uid()), create: create}
}

// resolve finds the directory that holds the last element of path, and
// returns it open (O_PATH; the caller closes it) with that element's name.
// When followFinal is set, a symbolic link at the end is followed too (a
// dangling one to where its file would be), so that the name returned is
// not a link; otherwise it is left for the caller (to remove, say). A
// path that ends in "/", "." or ".." names a directory, returned as
// itself with the name ".". Every link on the way must pass trustLink,
// or the walk stops with EACCES. Errors are *fs.PathError for op, naming
// the path as far as it was resolved.
func (w *walker) resolve(path, op string, followFinal bool) (*os.File, string, error) {
	dir, _, name, err := w.resolveDir(path, op, followFinal)
	return dir, name, err
}

// resolveDir is resolve that also returns the path of the directory it
// returns, as resolved: from "/", with every link on the way followed.
func (w *walker) resolveDir(path, op string, followFinal bool) (dir *os.File, dirPath, name string, err error) {
	if path == "" {
		return nil, "", "", &fs.PathError{Op: op, Path: path, Err: syscall.ENOENT}
	}
	s, err := startWalk(path)
	if err != nil {
		return nil, "", "", &fs.PathError{Op: op, Path: path, Err: err}
	}
	defer s.close()
	for len(s.queue) > 0 {
		if w.steps++; w.steps > maxSteps {
			return nil, "", "", &fs.PathError{Op: op, Path: path, Err: syscall.ELOOP}
		}
		name := s.queue[0]
		s.queue = s.queue[1:]
		if name == ".." {
			s.up()
			continue
		}
		if len(s.queue) == 0 {
			done, err := w.final(s, name, op, followFinal)
			if err != nil {
				return nil, "", "", err
			}
			if done {
				return s.take(), "/" + strings.Join(s.names, "/"), name, nil
			}
			continue
		}
		if err := w.step(s, name, op); err != nil {
			return nil, "", "", err
		}
	}
	return nil, "", "", &fs.PathError{Op: op, Path: path, Err: syscall.EINVAL} // not reached: "." ends every queue
}

// final looks at name, the last element, and reports whether the walk is
// done; when it is a link to follow, its target's elements are queued.
func (w *walker) final(s *walk, name, op string, followFinal bool) (bool, error) {
	if !followFinal || name == "." {
		return true, nil
	}
	var st unix.Stat_t
	err := unix.Fstatat(s.top(), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return true, nil // missing, or not a link: the caller's open decides
	}
	return false, w.follow(s, name, op, &st)
}

// step goes down into the directory name, following it if it is a link,
// making it if it is missing and w.create is set.
func (w *walker) step(s *walk, name, op string) error {
	for {
		fd, err := openPathAt(s.top(), name, unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err == nil {
			s.push(fd, name)
			return nil
		}
		if errors.Is(err, unix.ENOENT) && w.create {
			if w.steps++; w.steps > maxSteps {
				return &fs.PathError{Op: "mkdir", Path: s.shown(name), Err: syscall.ELOOP}
			}
			if err := w.mkdir(s, name); err != nil {
				return err
			}
			continue // open what was made, or what another made first
		}
		if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			return w.wayError(s, name, op, err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(s.top(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return w.wayError(s, name, op, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return w.wayError(s, name, op, syscall.ENOTDIR)
		}
		return w.follow(s, name, op, &st)
	}
}

// wayError is the error of the element name on the way: for a walk that
// makes directories, a failure of mkdir on the path so far, as
// os.MkdirAll reports it; else a failure of op on the whole path, as
// open(2) reports it.
func (w *walker) wayError(s *walk, name, op string, err error) error {
	if w.create {
		return &fs.PathError{Op: "mkdir", Path: s.shown(name), Err: err}
	}
	return &fs.PathError{Op: op, Path: s.path, Err: err}
}

// mkdir makes the directory name in the walk's current one, and records
// it. Another having made it first is no error.
func (w *walker) mkdir(s *walk, name string) error {
	err := ignoringEINTR(func() error { return unix.Mkdirat(s.top(), name, 0o755) })
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: s.shown(name), Err: err}
	}
	parent, err := dupFile(s.top(), s.shown(""))
	if err != nil {
		return err
	}
	w.made = append(w.made, madeDir{parent: parent, name: name})
	return nil
}

// follow queues the target of the link name, whose stat is st, if
// trustLink lets w follow it.
func (w *walker) follow(s *walk, name, op string, st *unix.Stat_t) error {
	var dir unix.Stat_t
	if err := unix.Fstat(s.top(), &dir); err != nil {
		return &fs.PathError{Op: op, Path: s.shown(name), Err: err}
	}
	if !trustLink(w.uid, st.Uid, dir.Uid, dir.Mode) {
		return &fs.PathError{Op: op, Path: s.shown(name), Err: untrustedLink{owner: st.Uid}}
	}
	if w.links++; w.links > maxLinks {
		return &fs.PathError{Op: op, Path: s.shown(name), Err: syscall.ELOOP}
	}
	target, err := beneath.Readlink(s.top(), name)
	if err != nil {
		return &fs.PathError{Op: op, Path: s.shown(name), Err: err}
	}
	return s.splice(target)
}

// trustLink reports whether a write by uid may follow a symbolic link
// owned by linkUID in a directory owned by dirUID with mode dirMode. A
// link is followed when it is the writer's own or root's, or when only
// root could have put it there; otherwise only by a writer other than
// root, and only when the link's owner also owns its directory, as
// Linux's fs.protected_symlinks decides for sticky directories. Root
// never follows a link another user could have planted: it would write,
// with root's rights, wherever that user chose. (To write through a
// user's links, write as that user.)
func trustLink(uid, linkUID, dirUID uint32, dirMode uint32) bool {
	switch {
	case linkUID == uid, linkUID == 0:
		return true
	case dirUID == 0 && dirMode&0o022 == 0:
		return true
	case uid == 0:
		return false
	}
	return linkUID == dirUID
}

// untrustedLink is the error of a link trustLink refused; errors.Is
// matches it with EACCES and fs.ErrPermission.
type untrustedLink struct{ owner uint32 }

func (e untrustedLink) Error() string {
	return fmt.Sprintf("permission denied: a symbolic link owned by another user (uid %d) is not followed", e.owner)
}

func (e untrustedLink) Unwrap() error { return syscall.EACCES }

// removeMade removes the directories w made, innermost first, as long as
// they are empty (rmdir(2) removes nothing else), and closes them. It is
// how a failed write leaves no folder it created behind.
func (w *walker) removeMade() {
	for i := len(w.made) - 1; i >= 0; i-- {
		_ = unix.Unlinkat(int(w.made[i].parent.Fd()), w.made[i].name, unix.AT_REMOVEDIR)
	}
	w.closeMade()
}

// closeMade forgets the directories w made, keeping them.
func (w *walker) closeMade() {
	for _, m := range w.made {
		m.parent.Close()
	}
	w.made = nil
}

// walk is the state of one resolution: the directories open from the
// start down to the current one, and the elements left to resolve.
type walk struct {
	stack []*os.File // O_PATH directories from "/"; the last is the current one
	names []string   // the path as resolved so far, one element per stack entry but the first
	queue []string
	path  string // as the caller named it
}

// startWalk opens "/", where every walk starts: a relative path is taken
// from the agent's working directory, so that its ".." elements go where
// the kernel's would.
func startWalk(path string) (*walk, error) {
	orig := path
	if !strings.HasPrefix(path, "/") {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		path = wd + "/" + path
	}
	fd, err := openPathAt(unix.AT_FDCWD, "/", unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &walk{stack: []*os.File{os.NewFile(uintptr(fd), "/")}, queue: elements(path), path: orig}, nil
}

// elements splits path into the names a walk resolves: no empty ones and
// no ".", but a final "." when path names a directory as such (it ends
// in "/", "." or ".."), so that the last element is never "..".
func elements(path string) []string {
	var out []string
	for e := range strings.SplitSeq(path, "/") {
		if e != "" && e != "." {
			out = append(out, e)
		}
	}
	if len(out) == 0 || out[len(out)-1] == ".." || strings.HasSuffix(path, "/") ||
		strings.HasSuffix(path, "/.") || path == "." {
		out = append(out, ".")
	}
	return out
}

func (s *walk) top() int { return int(s.stack[len(s.stack)-1].Fd()) }

func (s *walk) push(fd int, name string) {
	s.stack = append(s.stack, os.NewFile(uintptr(fd), name))
	s.names = append(s.names, name)
}

// up goes to the parent of the current directory: the one it was reached
// from. At the start ("/", or where a relative path started) it stays, as
// the kernel stays at "/".
func (s *walk) up() {
	if len(s.stack) > 1 {
		s.stack[len(s.stack)-1].Close()
		s.stack = s.stack[:len(s.stack)-1]
		s.names = s.names[:len(s.names)-1]
	}
}

// splice queues the elements of a link's target before those left; an
// absolute target starts again from "/".
func (s *walk) splice(target string) error {
	if strings.HasPrefix(target, "/") {
		fd, err := openPathAt(unix.AT_FDCWD, "/", unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		s.close()
		s.stack, s.names = []*os.File{os.NewFile(uintptr(fd), "/")}, nil
	}
	rest := elements(target)
	if rest[len(rest)-1] == "." && len(s.queue) > 0 {
		rest = rest[:len(rest)-1] // more follows: the target is a directory on the way
	}
	s.queue = append(rest, s.queue...)
	return nil
}

// shown is the path of name in the current directory, as resolved so
// far, for errors.
func (s *walk) shown(name string) string {
	return filepath.Join("/"+strings.Join(s.names, "/"), name)
}

// take returns the current directory, which the walk no longer closes.
func (s *walk) take() *os.File {
	f := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	return f
}

func (s *walk) close() {
	for _, f := range s.stack {
		f.Close()
	}
	s.stack = nil
}

// openPathAt opens name in dirfd with O_PATH (a handle for walking, which
// needs no read permission) and flags.
func openPathAt(dirfd int, name string, flags int) (int, error) {
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_CLOEXEC|flags, 0)
		return err
	})
	return fd, err
}

// dupFile returns a new handle on the directory open as fd.
func dupFile(fd int, name string) (*os.File, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "dup", Path: name, Err: err}
	}
	return os.NewFile(uintptr(nfd), name), nil
}
