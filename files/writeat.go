package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// AtEnd is the offset of WriteAt that appends.
const AtEnd = -1

// ErrOffset is wrapped by WriteAt's error for an offset past the end of
// the file: writing there would leave a hole of zeros, which is never
// what resuming an upload wants.
var ErrOffset = errors.New("offset past the end of the file")

// WriteAt writes everything r holds into the regular file at path, in
// place, from byte offset (AtEnd: from its end), creating the file (mode
// 0644) and its missing parent directories if need be, as opts.Owner
// (see WriteOptions). Bytes beyond what it writes are kept, as dd
// conv=notrunc keeps them. Unlike WriteAtomic this is not atomic: a
// reader may see a part of what is written, and a failure midway leaves
// what was written so far. opts.Mode, if not zero, becomes the file's
// permission bits. An offset past the end gives an error wrapping
// ErrOffset; a named pipe, a socket or a device an error wrapping
// ErrNotRegular; both before r is read, and then the directories it
// made are removed. Links are followed as Stage follows them.
// Written.Size is the file's size once written.
func WriteAt(ctx context.Context, path string, r io.Reader, offset int64, opts WriteOptions) (Written, error) {
	flag := os.O_WRONLY | os.O_CREATE
	if offset == AtEnd {
		flag |= os.O_APPEND
	}
	var size int64
	f, created, err := openWrite(path, flag, true, opts.Owner, func(st *unix.Stat_t) error {
		if st != nil {
			size = st.Size
		}
		if offset > size {
			return fmt.Errorf("write %s: %w (offset %d, size %d)", path, ErrOffset, offset, size)
		}
		return nil
	})
	if err != nil {
		return Written{}, err
	}
	defer f.Close()
	if opts.Mode.Perm() != 0 {
		if err := f.Chmod(opts.Mode.Perm()); err != nil {
			return Written{}, err
		}
	}
	if offset != AtEnd {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return Written{}, err
		}
	}
	if _, err := copyTo(ctx, f, path, r); err != nil {
		return Written{}, err
	}
	end, err := f.Stat()
	if err != nil {
		return Written{}, err
	}
	if err := f.Sync(); err != nil {
		return Written{}, markNoSpace(err)
	}
	return Written{Path: path, Size: end.Size(), Created: created}, f.Close()
}

// openWrite opens the regular file at path for writing with flag
// (os.O_WRONLY|os.O_CREATE, and maybe os.O_APPEND; never O_TRUNC), as o
// (nil: the agent), resolving path as Stage does and making the missing
// parent directories if mkdir is set. check, if not nil, sees the file's
// stat (nil if there is none) before it is opened, and may refuse it. A
// directory gives EISDIR, anything but a regular file an error wrapping
// ErrNotRegular, before it is opened. It reports whether it created the
// file. On an error, the directories it made are removed.
func openWrite(path string, flag int, mkdir bool, o *Owner, check func(*unix.Stat_t) error) (*os.File, bool, error) {
	w := newWalker(o, mkdir)
	var f *os.File
	var created bool
	err := asOwner(o, func() error {
		dir, name, err := w.resolve(path, "open", true)
		if err != nil {
			return err
		}
		defer dir.Close()
		old, err := existing(dir, name, path)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(old); err != nil {
				return err
			}
		}
		// O_NOFOLLOW: a link put there since is refused (ELOOP), not
		// followed. O_NONBLOCK and O_NOCTTY: see openRegular.
		fd, err := openAt(int(dir.Fd()), name, flag|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return &fs.PathError{Op: "open", Path: path, Err: err}
		}
		f, created = os.NewFile(uintptr(fd), path), old == nil
		return nil
	})
	if err != nil {
		_ = asOwner(o, func() error { w.removeMade(); return nil })
		return nil, false, err
	}
	w.closeMade()
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, false, err
	case !fi.Mode().IsRegular(): // it changed since the first look
		f.Close()
		return nil, false, refusal("write", path, fi.Mode())
	}
	return f, created, nil
}
