package files

import (
	"archive/tar"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The writers of each kind of archive entry into Extract's temporary tree.
// Each works in the entry's directory, opened by parentOf, with the
// *at system calls and the entry's base name only.

// parentOf opens the directory of the entry name in the temporary tree,
// creating it and its missing parents (0755) if needed, as tar -x does,
// and returns it with the entry's base name. The caller does not close it.
func (x *extractor) parentOf(raw, name string) (int, string, error) {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if x.cached >= 0 && x.cachedDir == dir {
		return x.cached, base, nil
	}
	x.closeCache()
	fd, err := openBeneath(x.tmp, dir)
	if errors.Is(err, unix.ENOENT) {
		fd, err = x.mkdirAll(dir)
	}
	if err != nil {
		return -1, "", x.dirError(err, raw, dir)
	}
	x.cachedDir, x.cached = dir, fd
	return fd, base, nil
}

func (x *extractor) closeCache() {
	if x.cached >= 0 {
		unix.Close(x.cached)
		x.cached = -1
	}
}

// mkdirAll opens the directory dir of the temporary tree, creating what
// is missing of it.
func (x *extractor) mkdirAll(dir string) (int, error) {
	fd, err := openBeneath(x.tmp, "")
	if err != nil {
		return -1, err
	}
	for _, elem := range strings.Split(dir, "/") {
		next, _, err := mkdirOpen(fd, elem, 0o755, x.opts.Owner)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// dirError reports the failure err to open the directory dir of the entry
// raw: through a link of the archive, or a file in the way, refuse it.
func (x *extractor) dirError(err error, raw, dir string) error {
	if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.EEXIST) {
		return markNoSpace(&fs.PathError{Op: "mkdir", Path: raw, Err: err})
	}
	// Which element is a link? The temporary tree is the agent's alone:
	// looking at it by path is safe.
	for p := ""; ; {
		i := strings.IndexByte(dir[len(p):], '/')
		if i < 0 {
			p = dir
		} else {
			p = dir[:len(p)+i]
		}
		if st, err := lstatAt(x.tmp, p); err == nil && isLink(st) {
			return refuse(raw, fmt.Sprintf("it goes through the symbolic link %q of the archive", p))
		}
		if p == dir {
			return refuse(raw, "a file of the archive is in the way of its directory")
		}
		p += "/"
	}
}

// makeRoom removes an earlier entry of the name base from the directory
// parent, unless it is a directory: a later entry replaces an earlier one,
// as with tar -x.
func (x *extractor) makeRoom(raw string, parent int, base string) error {
	st, err := lstatAt(parent, base)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return x.tempError(err, "lstat", raw)
	case isDir(st):
		return refuse(raw, "a directory of the same name came before it")
	}
	if err := unix.Unlinkat(parent, base, 0); err != nil {
		return x.tempError(err, "remove", raw)
	}
	return nil
}

// tempError reports a failure in the temporary tree as one on the entry.
func (x *extractor) tempError(err error, op, raw string) error {
	return markNoSpace(&fs.PathError{Op: op, Path: raw, Err: err})
}

// file unpacks a regular file.
func (x *extractor) file(name string, hdr *tar.Header, tr *tar.Reader) error {
	parent, base, err := x.parentOf(hdr.Name, name)
	if err != nil {
		return err
	}
	if err := x.makeRoom(hdr.Name, parent, base); err != nil {
		return err
	}
	fd, err := ignoringEINTRFD(func() (int, error) {
		return unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return x.tempError(err, "open", hdr.Name)
	}
	err = x.fill(fd, hdr, tr)
	if err == nil {
		err = chownFD(x.opts.Owner, fd)
	}
	if err == nil {
		err = unix.Fchmod(fd, uint32(fs.FileMode(hdr.Mode).Perm()))
	}
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = x.tempError(cerr, "close", hdr.Name)
	}
	if err != nil {
		return err
	}
	x.size += hdr.Size
	if !hdr.ModTime.IsZero() {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(hdr.ModTime.UnixNano())}
		_ = unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// dir unpacks a directory. It is made with owner access, so that its
// entries can be written; a mode without it is restored once in place.
func (x *extractor) dir(name string, hdr *tar.Header) error {
	parent, base, err := x.parentOf(hdr.Name, name)
	if err != nil {
		return err
	}
	if st, err := lstatAt(parent, base); err == nil && !isDir(st) {
		if err := x.makeRoom(hdr.Name, parent, base); err != nil {
			return err
		}
	}
	fd, _, err := mkdirOpen(parent, base, 0o700, x.opts.Owner)
	if err != nil {
		return x.tempError(err, "mkdir", hdr.Name)
	}
	mode := uint32(fs.FileMode(hdr.Mode).Perm())
	err = unix.Fchmod(fd, mode|0o700)
	unix.Close(fd)
	if err != nil {
		return x.tempError(err, "chmod", hdr.Name)
	}
	if mode&0o700 != 0o700 {
		if len(x.restricted) >= maxTracked {
			return refuse(hdr.Name, fmt.Sprintf("the archive has more than %d directories without owner access", maxTracked))
		}
		x.restricted = append(x.restricted, restrictedDir{name, mode})
	}
	return nil
}

// symlink unpacks a symbolic link, once checkLink has found where it
// leads.
func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if err := x.checkLink(name, hdr.Name, hdr.Linkname); err != nil {
		return err
	}
	parent, base, err := x.parentOf(hdr.Name, name)
	if err != nil {
		return err
	}
	if err := x.makeRoom(hdr.Name, parent, base); err != nil {
		return err
	}
	if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
		return x.tempError(err, "symlink", hdr.Name)
	}
	if err := chownAt(x.opts.Owner, parent, base); err != nil {
		return x.tempError(err, "lchown", hdr.Name)
	}
	return nil
}

// checkLink refuses a symbolic link that could lead outside the directory,
// whatever the other entries of this archive or any other may be. The
// rule is local, so the check is linear in the target's length:
//
//   - a relative target may start with ".." elements, at most as many as
//     the link has parents in the archive ("a/b/l" may go up twice), and
//     have none after a name ("x/../y" is refused: x may be, or later
//     become, a link to somewhere higher, from which ".." leads out);
//   - an absolute target must lie in the directory, with no ".." at all.
//
// The link's parents are directories (no entry goes through a link, and
// placing the tree replaces links in the way, never follows them), so
// going up that many stays inside; every name after that descends, into a
// directory or through a link that obeys the same rule. By induction, a
// link unpacked here never leads out through links unpacked here, whatever
// another archive adds later.
func (x *extractor) checkLink(name, raw, target string) error {
	if target == "" {
		return refuse(raw, "a symbolic link without a target")
	}
	elems := strings.Split(target, "/")
	if filepath.IsAbs(target) {
		if !within(x.dest, target) {
			return refuse(raw, fmt.Sprintf("a symbolic link to %q, outside the directory", target))
		}
		if strings.Contains("/"+target+"/", "/../") {
			return refuse(raw, fmt.Sprintf("a symbolic link to %q, with a .. element: where it leads depends on what comes before it", target))
		}
		return nil
	}
	ups, named := 0, false
	for _, e := range elems {
		switch {
		case e == "" || e == ".":
		case e != "..":
			named = true
		case named:
			return refuse(raw, fmt.Sprintf("a symbolic link to %q, with a .. element after a name: where it leads depends on what that name is, or may become", target))
		default:
			ups++
		}
	}
	if ups > strings.Count(name, "/") {
		return refuse(raw, fmt.Sprintf("a symbolic link to %q, which leads outside the directory", target))
	}
	return nil
}

// within reports whether the absolute path p is dir or below it.
func within(dir, p string) bool {
	dir, p = filepath.Clean(dir), filepath.Clean(p)
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

// hardLink unpacks a hard link to a regular file unpacked before it.
func (x *extractor) hardLink(name string, hdr *tar.Header) error {
	target, err := entryName(hdr.Linkname)
	if err != nil || target == "" {
		return refuse(hdr.Name, fmt.Sprintf("a hard link to %q, which is not a file of the archive", hdr.Linkname))
	}
	notFile := refuse(hdr.Name, fmt.Sprintf("a hard link to %q, which is not a regular file that came before it", hdr.Linkname))
	tdir, tbase := path.Split(target)
	src, err := openBeneath(x.tmp, strings.TrimSuffix(tdir, "/"))
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return x.dirError(err, hdr.Name, strings.TrimSuffix(tdir, "/"))
		}
		return notFile
	}
	defer unix.Close(src)
	if st, err := lstatAt(src, tbase); err != nil || !isReg(st) {
		return notFile
	}
	if target == name {
		return nil // a file linked to itself is the file
	}
	parent, base, err := x.parentOf(hdr.Name, name)
	if err != nil {
		return err
	}
	if err := x.makeRoom(hdr.Name, parent, base); err != nil {
		return err
	}
	if err := unix.Linkat(src, tbase, parent, base, 0); err != nil {
		return x.tempError(err, "link", hdr.Name)
	}
	return nil
}
