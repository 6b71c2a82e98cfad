package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// AtEnd is the offset of WriteAt that appends.
const AtEnd = -1

// ErrOffset is wrapped by WriteAt's error for an offset past the end of
// the file: writing there would leave a hole of zeros, which is never
// what resuming an upload wants.
var ErrOffset = errors.New("offset past the end of the file")

// WriteAt writes everything r holds into the regular file at path, in
// place, from byte offset (AtEnd: from its end), creating the file (mode
// 0644) and its missing parent directories if need be. Bytes beyond what
// it writes are kept, as dd conv=notrunc keeps them. Unlike WriteAtomic
// this is not atomic: a reader may see a part of what is written, and a
// failure midway leaves what was written so far. mode, if not zero,
// becomes the file's permission bits. An offset past the end gives an
// error wrapping ErrOffset; a named pipe, a socket or a device an error
// wrapping ErrNotRegular; both before r is read. Written.Size is the
// file's size once written.
func WriteAt(ctx context.Context, path string, r io.Reader, offset int64, mode os.FileMode) (Written, error) {
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(path)), 0o755); err != nil {
		return Written{}, asPath(err, "mkdir", filepath.Dir(path))
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	if created && offset > 0 {
		return Written{}, fmt.Errorf("write %s: %w (offset %d, size 0)", path, ErrOffset, offset)
	}
	flag := os.O_WRONLY | os.O_CREATE
	if offset == AtEnd {
		flag |= os.O_APPEND
	}
	f, fi, err := openRegular(path, flag, "write")
	if err != nil {
		return Written{}, err
	}
	defer f.Close()
	if mode.Perm() != 0 {
		if err := f.Chmod(mode.Perm()); err != nil {
			return Written{}, err
		}
	}
	if offset != AtEnd {
		if offset > fi.Size() {
			return Written{}, fmt.Errorf("write %s: %w (offset %d, size %d)", path, ErrOffset, offset, fi.Size())
		}
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
