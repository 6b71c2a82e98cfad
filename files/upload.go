package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// An upload replaces a file whole: its bytes go to a temporary file in the
// same directory (in a private directory there, see Staged), which is
// synced and then renamed over the file. Another process opening the file
// sees the old content or the new one in full, never a part; one that has
// it open keeps reading the old one. A failure at any point (the source
// fails, the disk is full, ctx ends) removes the temporary file and the
// directories the upload made, and leaves the old file as it was. Only a
// crash of the agent itself can leave a temporary file behind: it is
// ".<name>.upload-<digits>/data", beside the file.

// WriteOptions are the settings of Stage, WriteAtomic and WriteAt. The
// zero value is the default.
type WriteOptions struct {
	// Mode is the file's permission bits. If zero, a new file gets 0644
	// and a replaced one keeps its own.
	Mode fs.FileMode
	// Owner is who writes: the file and the directories made on its way
	// are Owner's, and the kernel checks the write with Owner's rights.
	// If nil, the agent writes as itself, and a file it replaces keeps
	// its owner.
	Owner *Owner
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
//
// The file waits in a directory of its own (mode 0700, named
// ".<name>.upload-<digits>"), made in the destination's directory by the
// writer: no other user can rename, replace or open the file there, and
// that directory, which is the writer's, cannot be moved to another
// parent by anyone but root (moving a directory changes its "..", which
// needs write permission on it), so the rename from it lands where the
// destination was resolved.
type Staged struct {
	path     string   // as the caller named it
	priv     *os.File // the private directory (O_PATH)
	privName string   // its name in the destination's directory
	name     string   // the destination's name in that directory
	walk     *walker  // the directories made on the way
	owner    *Owner
	size     int64
}

// stagedName is the name of the file in its private directory.
const stagedName = "data"

// Size returns the number of bytes staged.
func (s *Staged) Size() int64 { return s.size }

// Stage writes everything r holds to a temporary file beside the file at
// path, creating the missing parent directories (mode 0755), and syncs it;
// Commit then puts it in place. If path is a symbolic link, the file it
// leads to is the one replaced, as open(2) would write to it, if the
// writer may follow it (see trustLink; EACCES otherwise). A directory at
// path gives EISDIR; a named pipe, a socket or a device is refused with
// an error wrapping ErrNotRegular; all before r is read. Errors of r are
// returned as r gave them; a full disk gives an error matching
// ErrNoSpace. On any error nothing is left behind, not even the
// directories it made.
func Stage(ctx context.Context, path string, r io.Reader, opts WriteOptions) (*Staged, error) {
	s := &Staged{path: path, walk: newWalker(opts.Owner, true), owner: opts.Owner}
	var f *os.File
	var old *unix.Stat_t
	err := asOwner(opts.Owner, func() error {
		var err error
		f, old, err = s.open()
		return err
	})
	if err != nil {
		s.Discard() // what open made before it failed: the private directory, the parents
		return nil, err
	}
	mode := opts.Mode.Perm()
	if mode == 0 {
		mode = 0o644
		if old != nil {
			mode = fs.FileMode(old.Mode).Perm()
		}
	}
	if err := s.fill(ctx, f, r, mode, old); err != nil {
		f.Close()
		s.Discard()
		return nil, err
	}
	if err := f.Close(); err != nil {
		s.Discard()
		return nil, asPath(markNoSpace(err), "close", path)
	}
	return s, nil
}

// open resolves the destination, makes the private directory beside it
// and creates the file there; it runs as the writer. It returns the
// destination's stat if there is one.
func (s *Staged) open() (*os.File, *unix.Stat_t, error) {
	dir, name, err := s.walk.resolve(s.path, "open", true)
	if err != nil {
		return nil, nil, err
	}
	defer dir.Close()
	s.name = name
	old, err := existing(dir, name, s.path)
	if err != nil {
		return nil, nil, err
	}
	if err := s.makePrivate(dir, name); err != nil {
		return nil, nil, err
	}
	fd, err := openAt(int(s.priv.Fd()), stagedName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, old, &fs.PathError{Op: "open", Path: s.path, Err: err}
	}
	return os.NewFile(uintptr(fd), s.path), old, nil
}

// makePrivate makes and opens the private directory beside name in dir.
func (s *Staged) makePrivate(dir *os.File, name string) error {
	for try := 0; ; try++ {
		s.privName = fmt.Sprintf(".%s.upload-%d", shorten(name), rand.Uint32())
		err := ignoringEINTR(func() error { return unix.Mkdirat(int(dir.Fd()), s.privName, 0o700) })
		if errors.Is(err, unix.EEXIST) && try < 100 {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "open", Path: s.path, Err: err}
		}
		break
	}
	fd, err := openPathAt(int(dir.Fd()), s.privName, unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		_ = unix.Unlinkat(int(dir.Fd()), s.privName, unix.AT_REMOVEDIR)
		return &fs.PathError{Op: "open", Path: s.path, Err: err}
	}
	s.priv = os.NewFile(uintptr(fd), s.privName)
	return nil
}

// existing returns the stat of name in dir, nil if there is none. It
// refuses a directory (EISDIR) and anything but a regular file
// (ErrNotRegular), naming path.
func existing(dir *os.File, name, path string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, refusal("write", path, fileMode(st.Mode))
	}
	return &st, nil
}

// fileMode is the fs.FileMode of a stat(2) mode, type bits included.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	return mode
}

// fill copies r to f, sets its mode (and, for a file the agent replaces
// as itself, the old file's owner, if the agent may) and syncs it.
func (s *Staged) fill(ctx context.Context, f *os.File, r io.Reader, mode fs.FileMode, old *unix.Stat_t) error {
	n, err := copyTo(ctx, f, s.path, r)
	s.size = n
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return asPath(err, "chmod", s.path)
	}
	if old != nil && s.owner == nil && os.Geteuid() == 0 {
		// Only root can give a file away; a replaced file keeps its
		// owner, so that its user can still write it.
		_ = f.Chown(int(old.Uid), int(old.Gid))
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
	var created bool
	err := asOwner(s.owner, func() error {
		// The destination is reached from the private directory's "..":
		// the directory it was resolved in (see Staged).
		dest := "../" + s.name
		var st unix.Stat_t
		created = errors.Is(unix.Fstatat(int(s.priv.Fd()), dest, &st, unix.AT_SYMLINK_NOFOLLOW), unix.ENOENT)
		err := ignoringEINTR(func() error {
			return unix.Renameat(int(s.priv.Fd()), stagedName, int(s.priv.Fd()), dest)
		})
		if err != nil {
			return &fs.PathError{Op: "rename", Path: s.path, Err: err}
		}
		s.removePrivate(true)
		return nil
	})
	if err != nil {
		s.Discard()
		return Written{}, err
	}
	s.walk.closeMade()
	return Written{Path: s.path, Size: s.size, Created: created}, nil
}

// Discard removes the staged file, and the directories made for it.
// After Commit, or a first Discard, it does nothing.
func (s *Staged) Discard() {
	if s.priv == nil && len(s.walk.made) == 0 {
		return
	}
	_ = asOwner(s.owner, func() error {
		if s.priv != nil {
			_ = unix.Unlinkat(int(s.priv.Fd()), stagedName, 0)
			s.removePrivate(false)
		}
		s.walk.removeMade()
		return nil
	})
}

// removePrivate removes the private directory, emptied, syncing its
// parent first if sync is set (so that a rename survives a crash; a
// failure to sync is ignored: the rename has happened for every reader).
func (s *Staged) removePrivate(sync bool) {
	if fd, err := openAt(int(s.priv.Fd()), "..", unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
		if sync {
			_ = unix.Fsync(fd)
		}
		_ = unix.Unlinkat(fd, s.privName, unix.AT_REMOVEDIR)
		unix.Close(fd)
	} else if parent, err := openPathAt(int(s.priv.Fd()), "..", unix.O_DIRECTORY); err == nil {
		_ = unix.Unlinkat(parent, s.privName, unix.AT_REMOVEDIR) // a directory the writer may not read
		unix.Close(parent)
	}
	s.priv.Close()
	s.priv = nil
}

// openAt opens name in dirfd with flags (O_CLOEXEC added), mode for a
// file it creates. It never waits: see openRegular.
func openAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, mode)
		return err
	})
	return fd, err
}

// WriteAtomic replaces the file at path with everything r holds, as Stage
// and Commit do together.
func WriteAtomic(ctx context.Context, path string, r io.Reader, opts WriteOptions) (Written, error) {
	s, err := Stage(ctx, path, r, opts)
	if err != nil {
		return Written{}, err
	}
	return s.Commit()
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
