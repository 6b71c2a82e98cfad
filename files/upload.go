package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// An upload replaces a file whole: its bytes go to a temporary file in the
// same directory, which is synced and then renamed over the file. Another
// process opening the file sees the old content or the new one in full,
// never a part; one that has it open keeps reading the old one. A
// failure at any point (the source fails, the disk is full, ctx ends)
// removes the temporary file and leaves the old one as it was. Only a
// crash of the agent itself can leave a temporary file behind: it is
// named ".<name>.upload-<digits>", beside the file.

// WriteOptions are the settings of Stage and WriteAtomic. The zero value
// is the default.
type WriteOptions struct {
	// Mode is the file's permission bits. If zero, a new file gets 0644
	// and a replaced one keeps its own.
	Mode fs.FileMode
}

// Written describes a file an upload has written.
type Written struct {
	Path    string // as the caller named it
	Size    int64  // the file's size once written
	Created bool   // there was no file at Path before
}

// Staged is a file written in full beside its destination, waiting for
// Commit to put it in place or Discard to drop it. Exactly one of the two
// must be called.
type Staged struct {
	path   string // as the caller named it
	target string // path with a final symbolic link followed
	tmp    string // the temporary file, in target's directory
	size   int64
}

// Size returns the number of bytes staged.
func (s *Staged) Size() int64 { return s.size }

// Stage writes everything r holds to a temporary file beside the file at
// path, creating the missing parent directories (mode 0755), and syncs it;
// Commit then puts it in place. If path is a symbolic link, the file it
// leads to is the one replaced, as open(2) would write to it. A directory
// at path gives EISDIR; a named pipe, a socket or a device is refused with
// an error wrapping ErrNotRegular; both before r is read. Errors of r are
// returned as r gave them; a full disk gives an error matching
// ErrNoSpace. On any error nothing is left behind.
func Stage(ctx context.Context, path string, r io.Reader, opts WriteOptions) (*Staged, error) {
	target, old, err := prepareTarget(path)
	if err != nil {
		return nil, err
	}
	mode := opts.Mode.Perm()
	if mode == 0 {
		mode = 0o644
		if old != nil {
			mode = old.Mode().Perm()
		}
	}
	dir, base := filepath.Split(target)
	f, err := os.CreateTemp(dir, "."+shorten(base)+".upload-*")
	if err != nil {
		return nil, asPath(err, "open", path)
	}
	s := &Staged{path: path, target: target, tmp: f.Name()}
	if err := s.fill(ctx, f, r, mode, old); err != nil {
		f.Close()
		os.Remove(s.tmp)
		return nil, err
	}
	if err := f.Close(); err != nil {
		os.Remove(s.tmp)
		return nil, asPath(markNoSpace(err), "close", path)
	}
	return s, nil
}

// fill copies r to f, sets its mode (and, for a replaced file, its owner
// if the agent may) and syncs it.
func (s *Staged) fill(ctx context.Context, f *os.File, r io.Reader, mode fs.FileMode, old fs.FileInfo) error {
	n, err := copyTo(ctx, f, s.path, r)
	s.size = n
	var pe *fs.PathError
	if err != nil && errors.As(err, &pe) && pe.Path == f.Name() {
		err = asPath(err, pe.Op, s.path)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return asPath(err, "chmod", s.path)
	}
	if st, ok := statT(old); ok && os.Geteuid() == 0 {
		// Only root can give a file away; a replaced file keeps its
		// owner, so that its user can still write it.
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err := f.Sync(); err != nil {
		return asPath(markNoSpace(err), "sync", s.path)
	}
	return nil
}

// Commit renames the staged file over its destination, and reports
// whether there was none. Once it returns, with an error or not, the
// temporary file is gone.
func (s *Staged) Commit() (Written, error) {
	_, err := os.Lstat(s.target)
	created := errors.Is(err, fs.ErrNotExist)
	if err := os.Rename(s.tmp, s.target); err != nil {
		os.Remove(s.tmp)
		return Written{}, asPath(err, "rename", s.path)
	}
	syncDir(filepath.Dir(s.target))
	return Written{Path: s.path, Size: s.size, Created: created}, nil
}

// Discard removes the staged file.
func (s *Staged) Discard() { os.Remove(s.tmp) }

// WriteAtomic replaces the file at path with everything r holds, as Stage
// and Commit do together.
func WriteAtomic(ctx context.Context, path string, r io.Reader, opts WriteOptions) (Written, error) {
	s, err := Stage(ctx, path, r, opts)
	if err != nil {
		return Written{}, err
	}
	return s.Commit()
}

// prepareTarget returns the file an upload to path replaces (path, or
// where its final symbolic links lead), after creating its parent
// directories, and that file's description if it exists. It refuses a
// directory (EISDIR) and anything but a regular file (ErrNotRegular).
func prepareTarget(path string) (target string, old fs.FileInfo, err error) {
	if path == "" {
		return "", nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
	}
	target, err = followFinal(path)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", nil, asPath(err, "mkdir", filepath.Dir(path))
	}
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return target, nil, nil
	case err != nil:
		return "", nil, asPath(err, "open", path)
	case fi.IsDir():
		return "", nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	case !fi.Mode().IsRegular():
		return "", nil, refusal("write", path, fi.Mode())
	}
	return target, fi, nil
}

// maxLinks is how many symbolic links followFinal follows, as Linux's
// open(2) does before ELOOP.
const maxLinks = 40

// followFinal follows the symbolic links at the end of path, and returns
// the path of what they lead to, which may not exist (a dangling link is
// followed to where its file would be). The directories on the way are
// left to the kernel.
func followFinal(path string) (string, error) {
	p := filepath.Clean(path)
	for range maxLinks {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil // a missing file, or an error that the open will report
		}
		link, err := os.Readlink(p)
		if err != nil {
			return "", asPath(err, "open", path)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(p), link)
		}
		p = filepath.Clean(link)
	}
	return "", &fs.PathError{Op: "open", Path: path, Err: syscall.ELOOP}
}

// shorten keeps a temporary file's name under the 255 bytes a name may
// have, whatever the length of the name it is made from.
func shorten(name string) string {
	const keep = 100
	if len(name) <= keep {
		return name
	}
	return name[:keep]
}

// asPath reports err, a failure of op on a temporary or parent path, as a
// failure on path, which the caller named: "open /d/x: permission
// denied" rather than the temporary file's name. An err that is not an
// *fs.PathError is returned as it is.
func asPath(err error, op, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		e := &fs.PathError{Op: op, Path: path, Err: pe.Err}
		if errors.Is(err, ErrNoSpace) {
			return noSpaceError{e}
		}
		return e
	}
	return err
}

// statT returns fi's stat(2) fields, if fi is not nil and has them.
func statT(fi fs.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

// syncDir syncs the directory at dir, so that a rename in it survives a
// crash. A failure is ignored: the rename has happened for every reader.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// JoinBase returns the path of the file named name in the directory dir,
// keeping only name's last element, after a slash or a backslash (browsers
// on Windows send "C:\dir\a.txt"): "../x", "/etc/x" and "a/b/x" all name
// a file of dir. A name with no last element, or one that is "." or "..",
// gives an error wrapping ErrInvalidPath.
func JoinBase(dir, name string) (string, error) {
	base := name[strings.LastIndexAny(name, `/\`)+1:]
	if base == "" || base == "." || base == ".." {
		return "", fmt.Errorf("%w: %q names no file", ErrInvalidPath, name)
	}
	return filepath.Join(dir, base), nil
}
