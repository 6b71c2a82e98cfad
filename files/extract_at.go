package files

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/internal/beneath"
)

// Extraction works on directory file descriptors, never on paths another
// user could redirect (Docker's CVE-2018-15664 is the cautionary tale). A
// path below a directory is opened with package beneath, so that a
// symbolic link anywhere on the way fails with ELOOP instead of being
// followed. The functions here take and return raw descriptors; the
// caller closes what they return.

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openBeneath opens the directory rel ("" for dir itself), a relative
// path below the directory dir, without following any symbolic link.
func openBeneath(dir int, rel string) (int, error) {
	return beneath.Open(dir, rel, dirFlags)
}

func ignoringEINTRFD(fn func() (int, error)) (int, error) {
	for {
		fd, err := fn()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// lstatAt describes name in the directory dir, without following it.
func lstatAt(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := ignoringEINTR(func() error { return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
}

func fstat(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) })
	return st, err
}

func isDir(st unix.Stat_t) bool  { return st.Mode&unix.S_IFMT == unix.S_IFDIR }
func isLink(st unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFLNK }
func isReg(st unix.Stat_t) bool  { return st.Mode&unix.S_IFMT == unix.S_IFREG }

func sameFile(a, b unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

// chownAt gives name in the directory dir (not followed, if a link) to
// owner; a nil owner changes nothing.
func chownAt(owner *Owner, dir int, name string) error {
	if owner == nil {
		return nil
	}
	return ignoringEINTR(func() error {
		return unix.Fchownat(dir, name, int(owner.UID), int(owner.GID), unix.AT_SYMLINK_NOFOLLOW)
	})
}

// chownFD gives the open file fd to owner; a nil owner changes nothing.
func chownFD(owner *Owner, fd int) error {
	if owner == nil {
		return nil
	}
	return ignoringEINTR(func() error { return unix.Fchown(fd, int(owner.UID), int(owner.GID)) })
}

// mkdirOpen creates the directory name in dir with mode (umask applies)
// if it is missing, gives it to owner if it made it, and opens it without
// following a link. made reports whether it was made here.
func mkdirOpen(dir int, name string, mode uint32, owner *Owner) (fd int, made bool, err error) {
	err = ignoringEINTR(func() error { return unix.Mkdirat(dir, name, mode) })
	switch {
	case err == nil:
		made = true
	case !errors.Is(err, unix.EEXIST):
		return -1, false, err
	}
	fd, err = ignoringEINTRFD(func() (int, error) { return unix.Openat(dir, name, dirFlags, 0) })
	if err != nil {
		return -1, made, err
	}
	if made {
		// By the descriptor: what sits at name may have been swapped
		// since mkdirat, and only what was opened is given away. Only a
		// directory of our own is: one another user swapped in stays his.
		var st unix.Stat_t
		if st, err = fstat(fd); err == nil && int(st.Uid) == owner.uid() {
			err = chownFD(owner, fd) // a failure is the caller's: it was dropped once
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, made, err
	}
	return fd, made, nil
}

// removeContents removes everything in the directory fd, which it does
// not close.
func removeContents(fd int) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dup), "")
	// Every name first: removing entries while the listing is read could
	// make it skip some. The count is bounded by the archive's.
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := removeAt(fd, name); err != nil {
			return err
		}
	}
	return nil
}

// removeAt removes name from the directory fd, and all it holds if it is
// a directory.
func removeAt(fd int, name string) error {
	err := ignoringEINTR(func() error { return unix.Unlinkat(fd, name, 0) })
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	sub, err := ignoringEINTRFD(func() (int, error) { return unix.Openat(fd, name, dirFlags, 0) })
	if err != nil {
		return err
	}
	_ = unix.Fchmod(sub, 0o700) // a directory without owner access: its entries can go
	err = removeContents(sub)
	unix.Close(sub)
	if err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Unlinkat(fd, name, unix.AT_REMOVEDIR) })
}
