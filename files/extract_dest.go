package files

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// destination is the directory Extract unpacks into, held open.
type destination struct {
	path   string // the directory, as resolved: links on the way followed
	parent int    // its parent directory (O_PATH); -1 if the path named the directory itself ("/")
	name   string // its name in parent
	dir    int    // the directory itself; -1 if it does not exist yet
	tmpIn  int    // where the temporary directory goes: parent, or dir if it is a mount point or only it may be written
	uid    int    // who writes: the temporary directory must be theirs
	walk   *walker
}

// openDest finds the directory that Extract unpacks into, creates its
// missing parents, and opens them. The path is resolved as every write's
// is (see walker): one directory at a time from descriptors, a symbolic
// link followed only if trustLink lets owner follow it, so that root is
// never led by a link a user planted. From then on, everything is
// relative to the descriptors. It runs as owner (see asOwner).
func openDest(dir string, owner *Owner) (*destination, error) {
	if trimmed := strings.TrimRight(dir, "/"); trimmed != "" {
		dir = trimmed // "a/b/" is the directory a/b, to be made if missing, not a/b/. in a/b
	}
	w := newWalker(owner, true)
	parent, parentPath, name, err := w.resolveDir(dir, "extract", true)
	if err != nil {
		w.removeMade()
		return nil, err
	}
	defer parent.Close()
	d := &destination{parent: -1, dir: -1, tmpIn: -1, uid: owner.uid(), walk: w}
	if name == "." { // the path named a directory itself: "/", or one ending in ".."
		d.path = parentPath
		if d.dir, err = ignoringEINTRFD(func() (int, error) { return unix.Openat(int(parent.Fd()), ".", dirFlags, 0) }); err != nil {
			d.close(false)
			return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		d.tmpIn = d.dir
		return d, nil
	}
	d.name, d.path = name, filepath.Join(parentPath, name)
	if d.parent, err = unix.Dup(int(parent.Fd())); err != nil {
		d.close(false)
		return nil, &fs.PathError{Op: "open", Path: filepath.Dir(dir), Err: err}
	}
	d.tmpIn = d.parent
	d.dir, err = ignoringEINTRFD(func() (int, error) { return unix.Openat(d.parent, d.name, dirFlags, 0) })
	switch {
	case errors.Is(err, unix.ENOENT):
		d.dir = -1
		return d, nil
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP): // ELOOP: a link put there since the walk
		d.close(false)
		return nil, &fs.PathError{Op: "extract", Path: dir, Err: syscall.ENOTDIR}
	case err != nil:
		d.close(false)
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	pst, perr := fstat(d.parent)
	dst, derr := fstat(d.dir)
	if perr != nil || derr != nil || pst.Dev != dst.Dev {
		d.tmpIn = d.dir // a mount point: a rename from beside it would fail with EXDEV
	}
	return d, nil
}

// close closes the directories. The parents the walk made are kept if
// placed is set, else removed (if still empty).
func (d *destination) close(placed bool) {
	for _, fd := range []int{d.parent, d.dir} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if placed {
		d.walk.closeMade()
	} else {
		d.walk.removeMade()
	}
}

// temp is Extract's temporary directory: made with mode 0700 by the
// agent, so that no other user can enter it and change what is unpacked
// there. Another user who may write where it is can rename it, or put
// something else under its name: it is used by its descriptor only, and
// its name only to remove it once empty, if it still names it.
type temp struct {
	in     int    // the directory it is in (not owned)
	name   string // its name there
	fd     int
	st     unix.Stat_t
	placed bool // it became the destination
}

// makeTemp makes the temporary directory, named ".<name>.extract-<digits>".
func (d *destination) makeTemp() (*temp, error) {
	prefix := "." + shorten(filepath.Base(d.path)) + ".extract-"
	for range 100 {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		err := ignoringEINTR(func() error { return unix.Mkdirat(d.tmpIn, name, 0o700) })
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && d.dir >= 0 && d.tmpIn != d.dir {
			// The writer may write in the destination but not beside
			// it, as a user in a workdir whose parent is root's: the
			// temporary directory goes inside, as for a mount point.
			d.tmpIn = d.dir
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "mkdir", Path: name, Err: err}
		}
		return openTemp(d.tmpIn, name, d.uid)
	}
	return nil, &fs.PathError{Op: "mkdir", Path: prefix + "*", Err: unix.EEXIST}
}

// openTemp opens the directory name, just made in in (mode 0700) by
// uid, as a temp. What was opened must be the directory just made, not
// one another user swapped in: uid's own, closed to others.
func openTemp(in int, name string, uid int) (*temp, error) {
	t := &temp{in: in, name: name}
	var err error
	if t.fd, err = ignoringEINTRFD(func() (int, error) { return unix.Openat(in, name, dirFlags, 0) }); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if t.st, err = fstat(t.fd); err == nil && (int(t.st.Uid) != uid || t.st.Mode&0o077 != 0) {
		err = unix.EEXIST
	}
	if err != nil {
		unix.Close(t.fd)
		return nil, &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return t, nil
}

// remove empties the temporary directory (by its descriptor: wherever it
// is now), removes it if its name still names it, and closes it.
func (t *temp) remove() {
	defer unix.Close(t.fd)
	if t.placed {
		return
	}
	_ = removeContents(t.fd)
	if st, err := lstatAt(t.in, t.name); err == nil && sameFile(st, t.st) {
		_ = unix.Unlinkat(t.in, t.name, unix.AT_REMOVEDIR)
	}
}
