package files

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The writers of each kind of archive entry into Extract's temporary tree.

// makeRoom creates the parents of the entry name in the temporary tree and
// removes an earlier entry of the same name, unless it is a directory: a
// later entry replaces an earlier one, as with tar -x.
func (x *extractor) makeRoom(raw, name string) (string, error) {
	p := filepath.Join(x.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", x.tempError(err, raw)
	}
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return "", x.tempError(err, raw)
	case fi.IsDir():
		return "", refuse(raw, "a directory of the same name came before it")
	}
	delete(x.links, name)
	if err := os.Remove(p); err != nil {
		return "", x.tempError(err, raw)
	}
	return p, nil
}

// tempError reports a failure in the temporary tree as one on the entry:
// "mkdir x/y: not a directory" (an earlier entry made x a file).
func (x *extractor) tempError(err error, raw string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
			return refuse(raw, "a file of the archive is in the way of its directory")
		}
		return markNoSpace(&fs.PathError{Op: pe.Op, Path: raw, Err: pe.Err})
	}
	return err
}

// file unpacks a regular file.
func (x *extractor) file(name string, hdr *tar.Header, tr *tar.Reader) error {
	p, err := x.makeRoom(hdr.Name, name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return x.tempError(err, hdr.Name)
	}
	n, err := copyTo(x.ctx, f, p, archiveReader{tr})
	if err == nil {
		err = f.Chmod(fs.FileMode(hdr.Mode).Perm())
	}
	if cerr := f.Close(); err == nil {
		err = markNoSpace(cerr)
	}
	if err != nil {
		return x.tempError(err, hdr.Name)
	}
	x.size += n
	if !hdr.ModTime.IsZero() {
		_ = os.Chtimes(p, time.Time{}, hdr.ModTime)
	}
	return nil
}

// archiveReader marks its reader's errors, the archive's, as ErrBadArchive.
type archiveReader struct{ r io.Reader }

func (a archiveReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = badArchive(err)
	}
	return n, err
}

// dir unpacks a directory. It is made with owner access, so that its
// entries can be written; a mode without it is restored once in place.
func (x *extractor) dir(name string, hdr *tar.Header) error {
	p := filepath.Join(x.root, name)
	fi, err := os.Lstat(p)
	switch {
	case err == nil && !fi.IsDir():
		if _, err = x.makeRoom(hdr.Name, name); err != nil {
			return err
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return x.tempError(err, hdr.Name)
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		return x.tempError(err, hdr.Name)
	}
	mode := fs.FileMode(hdr.Mode).Perm()
	if err := os.Chmod(p, mode|0o700); err != nil {
		return x.tempError(err, hdr.Name)
	}
	if mode&0o700 != 0o700 {
		if err := x.track(hdr.Name); err != nil {
			return err
		}
		x.restricted = append(x.restricted, restrictedDir{name, mode})
	}
	return nil
}

// track counts one more remembered entry against maxTracked.
func (x *extractor) track(raw string) error {
	if len(x.links)+len(x.restricted) >= maxTracked {
		return refuse(raw, fmt.Sprintf("the archive has more than %d symbolic links and directories without owner access", maxTracked))
	}
	return nil
}

// symlink unpacks a symbolic link; checkLinks checks where it leads once
// every link of the archive is known.
func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if hdr.Linkname == "" {
		return refuse(hdr.Name, "a symbolic link without a target")
	}
	if filepath.IsAbs(hdr.Linkname) && !within(x.dest, hdr.Linkname) {
		return refuse(hdr.Name, fmt.Sprintf("a symbolic link to %q, outside the directory", hdr.Linkname))
	}
	if err := x.track(hdr.Name); err != nil {
		return err
	}
	p, err := x.makeRoom(hdr.Name, name)
	if err != nil {
		return err
	}
	if err := os.Symlink(hdr.Linkname, p); err != nil {
		return x.tempError(err, hdr.Name)
	}
	x.links[name] = hdr.Linkname
	return nil
}

// hardLink unpacks a hard link to a regular file unpacked before it.
func (x *extractor) hardLink(name string, hdr *tar.Header) error {
	target, err := entryName(hdr.Linkname)
	if err != nil || target == "" {
		return refuse(hdr.Name, fmt.Sprintf("a hard link to %q, which is not a file of the archive", hdr.Linkname))
	}
	if err := x.checkParents(hdr.Name, target); err != nil {
		return err
	}
	src := filepath.Join(x.root, target)
	if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
		return refuse(hdr.Name, fmt.Sprintf("a hard link to %q, which is not a regular file that came before it", hdr.Linkname))
	}
	p, err := x.makeRoom(hdr.Name, name)
	if err != nil {
		return err
	}
	if err := os.Link(src, p); err != nil {
		return x.tempError(err, hdr.Name)
	}
	return nil
}
