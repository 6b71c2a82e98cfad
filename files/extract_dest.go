package files

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// destination is the directory Extract unpacks into, held open.
type destination struct {
	path   string // the directory, with a final link followed
	parent int    // its parent directory; -1 for "/"
	name   string // its name in parent
	dir    int    // the directory itself; -1 if it does not exist yet
	tmpIn  int    // where the temporary directory goes: parent, or dir if it is a mount point
}

// openDest finds the directory that Extract unpacks into, creates its
// missing parents (given to owner), and opens them. The path the caller
// named is followed once, here; from then on, everything is relative to
// the descriptors.
func openDest(dir string, owner *Owner) (*destination, error) {
	target, err := followFinal(dir)
	if err != nil {
		return nil, err
	}
	d := &destination{path: target, parent: -1, dir: -1, tmpIn: -1}
	if filepath.Dir(target) == target { // "/"
		if d.dir, err = openDirCreating(target, nil); err != nil {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		d.tmpIn = d.dir
		return d, nil
	}
	d.name = filepath.Base(target)
	if d.parent, err = openDirCreating(filepath.Dir(target), owner); err != nil {
		return nil, &fs.PathError{Op: "mkdir", Path: filepath.Dir(dir), Err: err}
	}
	d.tmpIn = d.parent
	d.dir, err = ignoringEINTRFD(func() (int, error) { return unix.Openat(d.parent, d.name, dirFlags, 0) })
	switch {
	case errors.Is(err, unix.ENOENT):
		d.dir = -1
		return d, nil
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP): // ELOOP: a link put there since followFinal
		d.close()
		return nil, &fs.PathError{Op: "extract", Path: dir, Err: syscall.ENOTDIR}
	case err != nil:
		d.close()
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	pst, perr := fstat(d.parent)
	dst, derr := fstat(d.dir)
	if perr != nil || derr != nil || pst.Dev != dst.Dev {
		d.tmpIn = d.dir // a mount point: a rename from beside it would fail with EXDEV
	}
	return d, nil
}

func (d *destination) close() {
	for _, fd := range []int{d.parent, d.dir} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// openDirCreating opens the directory at path, following links as the
// caller named it, after creating it and its missing parents (0755, given
// to owner) if it is missing.
func openDirCreating(path string, owner *Owner) (int, error) {
	fd, err := ignoringEINTRFD(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	parent := filepath.Dir(path)
	if !errors.Is(err, unix.ENOENT) || parent == path {
		return fd, err
	}
	pfd, err := openDirCreating(parent, owner)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	fd, _, err = mkdirOpen(pfd, filepath.Base(path), 0o755, owner)
	return fd, err
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
		if err != nil {
			return nil, &fs.PathError{Op: "mkdir", Path: name, Err: err}
		}
		t := &temp{in: d.tmpIn, name: name}
		if t.fd, err = ignoringEINTRFD(func() (int, error) { return unix.Openat(d.tmpIn, name, dirFlags, 0) }); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		// What was opened must be the directory just made, not one
		// another user swapped in: the agent's own, closed to others.
		if t.st, err = fstat(t.fd); err == nil && (int(t.st.Uid) != os.Geteuid() || t.st.Mode&0o077 != 0) {
			err = unix.EEXIST
		}
		if err != nil {
			unix.Close(t.fd)
			return nil, &fs.PathError{Op: "mkdir", Path: name, Err: err}
		}
		return t, nil
	}
	return nil, &fs.PathError{Op: "mkdir", Path: prefix + "*", Err: unix.EEXIST}
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
