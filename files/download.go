package files

import (
	"context"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Open opens the regular file or the directory at path for reading,
// following symbolic links, as o (nil: the agent; the kernel checks o's
// rights), and describes it. A named pipe, a socket or a
// device is refused with an error wrapping ErrNotRegular ("read /p: named
// pipes and sockets cannot be read") before it is opened, and the open
// never waits (see openRegular). The caller closes the file.
func Open(path string, o *Owner) (f *os.File, fi fs.FileInfo, err error) {
	err = asOwner(o, func() error {
		f, fi, err = open(path)
		return err
	})
	return f, fi, err
}

func open(path string) (*os.File, fs.FileInfo, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, nil, refusal("read", path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() { // it changed since the first look
		f.Close()
		return nil, nil, refusal("read", path, fi.Mode())
	}
	return f, fi, nil
}

// WriteArchiveAs is WriteArchive with the tree read as o (nil: the agent):
// the kernel checks o's rights on every directory and file of it, so an
// entry o may not read cuts the archive as any unreadable entry does.
// WriteArchive reads and writes in the calling goroutine only, so running
// it whole on o's thread (see asOwner) covers every open it makes.
func WriteArchiveAs(ctx context.Context, w io.Writer, dir string, opts ArchiveOptions, o *Owner) error {
	return asOwner(o, func() error { return WriteArchive(ctx, w, dir, opts) })
}
