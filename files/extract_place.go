package files

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// place moves the unpacked tree into the destination: the temporary
// directory itself if the destination did not exist, else its entries
// one by one, after checking that none will fail for a directory in the
// way. Then the restricted directories get their modes.
func (x *extractor) place(d *destination, t *temp) error {
	if d.dir < 0 {
		return x.placeNew(d, t)
	}
	if err := x.inTheWay(d, t, ""); err != nil {
		return err
	}
	if err := x.merge(d, t, ""); err != nil {
		return err
	}
	return x.restrict(d.dir)
}

// placeNew renames the temporary directory to the destination, once it
// has its final modes and owner.
func (x *extractor) placeNew(d *destination, t *temp) error {
	if err := x.restrict(t.fd); err != nil {
		return err
	}
	if err := chownFD(x.opts.Owner, t.fd); err != nil {
		return err
	}
	if err := unix.Fchmod(t.fd, 0o755); err != nil {
		return err
	}
	// Its name must still be its own: another user who may write beside
	// it could have renamed it and put something else there.
	if st, err := lstatAt(t.in, t.name); err != nil || !sameFile(st, t.st) {
		return &fs.PathError{Op: "rename", Path: x.dest, Err: unix.ESTALE}
	}
	err := unix.Renameat2(t.in, t.name, d.parent, d.name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // a file system without RENAME_NOREPLACE
		err = unix.Renameat(t.in, t.name, d.parent, d.name)
	}
	if err != nil {
		return &fs.PathError{Op: "rename", Path: x.dest, Err: err}
	}
	t.placed = true
	return nil
}

// restrict gives the restricted directories, below root, their modes.
func (x *extractor) restrict(root int) error {
	for _, rd := range x.restricted {
		fd, err := openBeneath(root, rd.name)
		if err == nil {
			err = unix.Fchmod(fd, rd.mode)
			unix.Close(fd)
		}
		if err != nil {
			return &fs.PathError{Op: "chmod", Path: filepath.Join(x.dest, rd.name), Err: err}
		}
	}
	return nil
}

// pair opens the directory rel of the temporary tree and of the
// destination, and lists the former.
func (x *extractor) pair(d *destination, t *temp, rel string) (src, dst int, names []string, err error) {
	if src, err = openBeneath(t.fd, rel); err != nil {
		return -1, -1, nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	if dst, err = openBeneath(d.dir, rel); err != nil {
		unix.Close(src)
		return -1, -1, nil, &fs.PathError{Op: "open", Path: filepath.Join(x.dest, rel), Err: err}
	}
	dup, err := unix.Dup(src)
	if err == nil {
		f := os.NewFile(uintptr(dup), rel)
		names, err = f.Readdirnames(-1) // bounded by the archive's entries
		f.Close()
	}
	if err != nil {
		unix.Close(src)
		unix.Close(dst)
		return -1, -1, nil, err
	}
	return src, dst, names, nil
}

// inTheWay returns an EISDIR error for the first non-directory of the
// temporary tree whose place in the destination is held by a directory,
// which merge would not replace. It holds two directories open at a time,
// whatever the depth.
func (x *extractor) inTheWay(d *destination, t *temp, rel string) error {
	src, dst, names, err := x.pair(d, t, rel)
	if err != nil {
		return err
	}
	subs, err := func() ([]string, error) {
		defer unix.Close(src)
		defer unix.Close(dst)
		var subs []string
		for _, name := range names {
			dstat, err := lstatAt(dst, name)
			switch {
			case errors.Is(err, unix.ENOENT):
				continue
			case err != nil:
				return nil, &fs.PathError{Op: "lstat", Path: filepath.Join(x.dest, rel, name), Err: err}
			case !isDir(dstat):
				continue
			}
			if st, err := lstatAt(src, name); err != nil || !isDir(st) {
				return nil, &fs.PathError{Op: "extract", Path: filepath.Join(x.dest, rel, name), Err: syscall.EISDIR}
			}
			subs = append(subs, path.Join(rel, name))
		}
		return subs, nil
	}()
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if err := x.inTheWay(d, t, sub); err != nil {
			return err
		}
	}
	return nil
}

// merge moves the entries of the directory rel of the temporary tree into
// the same directory of the destination: an entry the destination lacks
// is renamed into it, a directory it has too is merged (and gets the mode
// of the archive's), anything else of it (a file, a link, even a link to
// a directory) is replaced. Every rename is between two directories held
// open, by one name: a directory of the destination swapped for a link
// meanwhile fails to open (ELOOP) rather than being followed.
func (x *extractor) merge(d *destination, t *temp, rel string) error {
	src, dst, names, err := x.pair(d, t, rel)
	if err != nil {
		return err
	}
	type sub struct {
		rel  string
		mode uint32
	}
	var subs []sub
	err = func() error {
		defer unix.Close(src)
		defer unix.Close(dst)
		for _, name := range names {
			full := filepath.Join(x.dest, rel, name)
			sst, err := lstatAt(src, name)
			if err != nil {
				return err
			}
			dstat, err := lstatAt(dst, name)
			switch {
			case errors.Is(err, unix.ENOENT):
			case err != nil:
				return &fs.PathError{Op: "lstat", Path: full, Err: err}
			case isDir(dstat) && isDir(sst):
				subs = append(subs, sub{path.Join(rel, name), sst.Mode & 0o7777})
				continue
			case isDir(dstat):
				return &fs.PathError{Op: "extract", Path: full, Err: syscall.EISDIR}
			case isDir(sst):
				// rename(2) puts a directory only where nothing is.
				if err := unix.Unlinkat(dst, name, 0); err != nil {
					return &fs.PathError{Op: "remove", Path: full, Err: err}
				}
			}
			if err := unix.Renameat(src, name, dst, name); err != nil {
				return &fs.PathError{Op: "rename", Path: full, Err: err}
			}
		}
		return nil
	}()
	if err != nil {
		return err
	}
	for _, s := range subs {
		if err := x.merge(d, t, s.rel); err != nil {
			return err
		}
		if fd, err := openBeneath(d.dir, s.rel); err == nil {
			_ = unix.Fchmod(fd, s.mode&0o777)
			unix.Close(fd)
		}
	}
	return nil
}
