// Package beneath opens a path below a directory file descriptor without
// following any symbolic link on the way, so that a user who may rename
// things in the tree cannot redirect an open made with more rights than
// theirs (Docker's CVE-2018-15664 is the cautionary tale).
package beneath

import (
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Open opens rel, a relative path below the directory dir, with flags
// (O_NOFOLLOW and O_CLOEXEC are added). A symbolic link anywhere on the
// way, the last element included, fails with ELOOP (or ENOTDIR), and a
// path that leaves dir ("..") with EXDEV. It uses openat2 with
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, or, where openat2 is missing
// (an old kernel, a seccomp filter, gVisor), walks one element at a time
// with O_NOFOLLOW, which refuses the same links. "" and "." open dir
// itself. The caller closes the descriptor returned.
func Open(dir int, rel string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if rel == "" || rel == "." {
		return retry(func() (int, error) { return unix.Openat(dir, ".", flags, 0) })
	}
	how := &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for range 8 { // EAGAIN: a rename elsewhere raced the lookup; bounded, then the slow way
		fd, err := unix.Openat2(dir, rel, how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM):
			return -1, err
		}
		break // no openat2 here, or a filter refused it
	}
	return walk(dir, rel, flags)
}

// walk is Open one element at a time: each directory on the way with
// O_PATH (which needs no read permission), the last with flags.
func walk(dir int, rel string, flags int) (int, error) {
	elems := strings.Split(rel, "/")
	for len(elems) > 0 && (elems[len(elems)-1] == "" || elems[len(elems)-1] == ".") {
		elems = elems[:len(elems)-1] // "a/b/" and "a/b/." open b
	}
	fd, err := retry(func() (int, error) {
		return unix.Openat(dir, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, err
	}
	for i, elem := range elems {
		if elem == "" || elem == "." {
			continue
		}
		if elem == ".." {
			unix.Close(fd)
			return -1, unix.EXDEV // as RESOLVE_BENEATH answers it
		}
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(elems)-1 {
			f = flags
		}
		next, err := retry(func() (int, error) { return unix.Openat(fd, elem, f, 0) })
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if len(elems) == 0 { // only "." elements: dir itself, opened with flags
		unix.Close(fd)
		return retry(func() (int, error) { return unix.Openat(dir, ".", flags, 0) })
	}
	return fd, nil
}

func retry(fn func() (int, error)) (int, error) {
	for {
		fd, err := fn()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// Chmod sets the mode of rel below dir through a handle on what is there,
// opened as Open opens it: a link at the end or on the way is ELOOP, not
// followed, whatever was put there since the caller looked. (fchmodat(2)
// follows a link at the end, and would change, with the caller's rights,
// the mode of whatever it leads to.)
func Chmod(dir int, rel string, mode uint32) error {
	return ChmodStat(dir, rel, func(unix.Stat_t) uint32 { return mode })
}

// ChmodStat is Chmod with the mode that mode returns for the stat of what
// was opened, so that it is decided on the file it is set on (its owner,
// say), not on what was at rel a moment before.
func ChmodStat(dir int, rel string, mode func(unix.Stat_t) uint32) error {
	fd, err := Open(dir, rel, unix.O_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP // O_PATH|O_NOFOLLOW opens the link itself
	}
	return chmodFD(fd, mode(st))
}

// chmodFD sets the mode of the file open as fd (O_PATH will do): by
// fchmodat2's AT_EMPTY_PATH, or where that is missing (Linux before 6.6)
// through the descriptor's link in /proc, which leads to the file it
// holds, whatever its name is now.
func chmodFD(fd int, mode uint32) error {
	err := retryErr(func() error { return unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH) })
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return chmodProc(fd, mode)
}

func chmodProc(fd int, mode uint32) error {
	return retryErr(func() error { return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode) })
}

// Chtimes sets the access and modification times of rel below dir; a
// link at the end gets them itself (AT_SYMLINK_NOFOLLOW), and one on the
// way is ELOOP.
func Chtimes(dir int, rel string, atime, mtime unix.Timespec) error {
	parent, base := ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		parent, base = rel[:i], rel[i+1:]
	}
	pfd, err := Open(dir, parent, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return retryErr(func() error {
		return unix.UtimesNanoAt(pfd, base, []unix.Timespec{atime, mtime}, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func retryErr(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Readlink returns the target of the symbolic link name in the directory
// dir. An empty target is ENOENT, as the kernel resolves it to nothing; a
// target past 64 KiB is ENAMETOOLONG.
func Readlink(dir int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			if n == 0 {
				return "", unix.ENOENT
			}
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}
