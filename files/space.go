package files

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNoSpace is matched by errors.Is for a write that failed because the
// file system is full or the user's quota is spent (ENOSPC, EDQUOT). The
// error's text keeps the system's words: "write /x/.a.upload-1:
// no space left on device".
var ErrNoSpace = errors.New("no space left on device")

// noSpaceError is a write error that errors.Is matches with ErrNoSpace as
// well as with its errno.
type noSpaceError struct{ err error }

func (e noSpaceError) Error() string { return e.err.Error() }

func (e noSpaceError) Unwrap() error { return e.err }

func (e noSpaceError) Is(target error) bool { return target == ErrNoSpace }

// markNoSpace returns err, marked with ErrNoSpace if it is ENOSPC or
// EDQUOT.
func markNoSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return noSpaceError{err}
	}
	return err
}

// FreeSpace returns how many bytes an unprivileged user may still write to
// the file system that holds dir (statfs(2)'s f_bavail): root may write a
// little more, into the blocks reserved for it.
func FreeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := ignoringEINTR(func() error { return unix.Statfs(dir, &st) }); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	free := st.Bavail * uint64(st.Bsize)
	if free > 1<<62 {
		return 1 << 62, nil
	}
	return int64(free), nil
}

// copyBufferSize is the size of the buffer that moves an upload from the
// request to the file: large enough that a gigabyte costs few system
// calls, small enough that many uploads at once cost little memory.
const copyBufferSize = 256 << 10

// copyTo copies r to the file f (named path in errors) until r's EOF,
// looking at ctx between reads, and returns how many bytes it wrote. A
// failure to write is marked with ErrNoSpace when the disk is full; a
// failure to read is returned as r gave it, so that the caller can tell
// its source's errors (the client left, a limit) from the disk's.
func copyTo(ctx context.Context, f *os.File, path string, r io.Reader) (int64, error) {
	buf := make([]byte, copyBufferSize)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, &os.PathError{Op: "write", Path: path, Err: err}
		}
		nr, rerr := r.Read(buf)
		if nr > 0 {
			nw, werr := f.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, markNoSpace(werr)
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
