package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrInvalidPath is wrapped by DeleteDir's error for a path it refuses to
// touch whatever the file system holds: "/" itself, or a path whose last
// element is "." or "..". Such a request is the client's mistake, not a
// failure of the file system.
var ErrInvalidPath = errors.New("invalid path")

// DeleteDir removes the directory at path and everything in it, like
// rm -rf, as o (nil: the agent; the kernel checks o's rights). A path
// that does not exist is success. A path that exists and is not a
// directory gives "remove <path>: not a directory"; a symbolic link to a
// directory counts as one, and only the link is removed, as with rm -rf.
// "/" and paths that end in "." or ".." are refused with ErrInvalidPath,
// as rm refuses them: "x/.." names x's parent, which rm -rf would empty.
// The directories on the way are resolved as Stage resolves them.
// DeleteDir stops with ctx's error between entries once ctx is done,
// leaving what it has not reached yet.
func DeleteDir(ctx context.Context, path string, o *Owner) error {
	if err := removable(path); err != nil {
		return err
	}
	return asOwner(o, func() error {
		dir, name, err := newWalker(o, false).resolve(path, "remove", false)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return asRemove(path, err)
		}
		defer dir.Close()
		return deleteDirAt(ctx, dir, name, path)
	})
}

// deleteDirAt is DeleteDir of name in dir, which path names.
func deleteDirAt(ctx context.Context, dir *os.File, name, path string) error {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return removeAll(ctx, dir, name, path)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		// A link to a directory goes, as rm -rf removes it; whether it
		// leads to one is asked of the kernel, as the link's target is
		// not opened.
		if unix.Fstatat(int(dir.Fd()), name, &st, 0) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := unix.Unlinkat(int(dir.Fd()), name, 0); err != nil {
				return &fs.PathError{Op: "remove", Path: path, Err: err}
			}
			return nil
		}
	}
	return &fs.PathError{Op: "remove", Path: path, Err: syscall.ENOTDIR}
}

// removable refuses, as written and before any cleaning, "/" (however
// many slashes) and a path whose last element is "." or "..".
func removable(path string) error {
	trimmed := strings.TrimRight(path, "/")
	if trimmed == "" {
		return fmt.Errorf("%w %q: refusing to delete the root directory", ErrInvalidPath, path)
	}
	if last := trimmed[strings.LastIndexByte(trimmed, '/')+1:]; last == "." || last == ".." {
		return fmt.Errorf("%w %q: refusing to delete a path whose last element is %q", ErrInvalidPath, path, last)
	}
	return nil
}

// asRemove reports err as a failure to remove path, keeping the system's
// wording: "lstat /f/x: not a directory" becomes "remove /f/x: not a
// directory".
func asRemove(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: "remove", Path: path, Err: pe.Err}
	}
	return err
}

// removeAll is os.RemoveAll of base, a directory in parent, with the
// same error texts ("unlinkat /p/x: permission denied"), that looks at
// ctx between entries. Like os.RemoveAll it works relative to the file
// descriptor of each parent and never follows a symbolic link, whatever
// is renamed meanwhile.
func removeAll(ctx context.Context, parent *os.File, base, path string) error {
	parentDir, _ := splitPath(path)
	if err := removeAllFrom(ctx, int(parent.Fd()), base); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Path = strings.TrimSuffix(parentDir, "/") + "/" + pe.Path
		}
		return err
	}
	return nil
}

// removeBatch is how many names removeAllFrom reads at a time.
const removeBatch = 1024

// removeAllFrom removes base, in the directory open as parentFd, and all
// it holds. It follows os.removeAllFrom; the errors it returns carry
// paths relative to the parent.
func removeAllFrom(ctx context.Context, parentFd int, base string) error {
	if err := ctx.Err(); err != nil {
		return &fs.PathError{Op: "unlinkat", Path: base, Err: err}
	}
	uErr := ignoringEINTR(func() error { return unix.Unlinkat(parentFd, base, 0) })
	if uErr == nil || errors.Is(uErr, syscall.ENOENT) {
		return nil
	}
	// EISDIR: a directory, to empty first. EPERM, EACCES: the parent is
	// not writable, but base may still be a directory to empty.
	if uErr != syscall.EISDIR && uErr != syscall.EPERM && uErr != syscall.EACCES {
		return &fs.PathError{Op: "unlinkat", Path: base, Err: uErr}
	}
	var firstErr error
	for {
		fd, err := openDirAt(parentFd, base)
		switch {
		case errors.Is(err, syscall.ENOENT):
			return nil
		case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
			// Not a directory (a link, with O_NOFOLLOW): the unlink's
			// error stands.
			return &fs.PathError{Op: "unlinkat", Path: base, Err: uErr}
		case err != nil:
			firstErr = &fs.PathError{Op: "openfdat", Path: base, Err: err}
		}
		if err != nil {
			break
		}
		dir := os.NewFile(uintptr(fd), base)
		n, err := removeEntries(ctx, dir, base, &firstErr)
		dir.Close()
		if err != nil {
			return err
		}
		// Removing entries may reorder the directory, so reading on could
		// skip some: read it again from the start until a short batch.
		if n < removeBatch {
			break
		}
	}
	rmErr := ignoringEINTR(func() error { return unix.Unlinkat(parentFd, base, unix.AT_REMOVEDIR) })
	if rmErr == nil || errors.Is(rmErr, syscall.ENOENT) {
		return nil
	}
	if firstErr != nil {
		return firstErr
	}
	return &fs.PathError{Op: "unlinkat", Path: base, Err: rmErr}
}

// removeEntries removes the entries of dir, named base in its parent, a
// batch at a time, and returns the size of the last batch. It keeps the
// first failure to remove one in *firstErr and goes on; it returns an
// error only when dir cannot be read or ctx is done.
func removeEntries(ctx context.Context, dir *os.File, base string, firstErr *error) (int, error) {
	for {
		names, err := dir.Readdirnames(removeBatch)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, fs.ErrNotExist) {
				return 0, nil
			}
			return 0, &fs.PathError{Op: "readdirnames", Path: base, Err: err}
		}
		failed := 0
		for _, name := range names {
			err := removeAllFrom(ctx, int(dir.Fd()), name)
			if err == nil {
				continue
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				pe.Path = base + "/" + pe.Path
			}
			if ctx.Err() != nil {
				return 0, err
			}
			failed++
			if *firstErr == nil {
				*firstErr = err
			}
		}
		// A batch where nothing could be removed is skipped, else
		// reading again from the start would find it again, forever.
		if failed != removeBatch {
			return len(names), nil
		}
	}
}

// openDirAt opens the directory name in the directory open as dirfd,
// without following a symbolic link.
func openDirAt(dirfd int, name string) (int, error) {
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		return err
	})
	return fd, err
}

// splitPath returns the directory and the last element of path, as
// os.RemoveAll splits it: "/a/b/" gives "/a" and "b", "b" gives "." and
// "b".
func splitPath(path string) (dir, base string) {
	for len(path) > 1 && path[0] == '/' && path[1] == '/' {
		path = path[1:]
	}
	path = strings.TrimRight(path, "/")
	i := strings.LastIndexByte(path, '/')
	switch {
	case i < 0:
		return ".", path
	case i == 0:
		return "/", path[1:]
	}
	return path[:i], path[i+1:]
}
