package files

import (
	"context"
	"io/fs"
	"os"
)

// Write creates or truncates the regular file at path and writes data to
// it, with mode 0644 for a new file, as o (nil: the agent; see
// WriteOptions.Owner). Parent directories are not created. Links are
// followed as Stage follows them. A named pipe, a socket or a device is
// refused with an error wrapping ErrNotRegular, before anything is
// truncated or written (and at once: a pipe without a reader does not
// make it wait). Write stops with ctx's error between pieces of data
// once ctx is done, leaving the file with what was written so far.
func Write(ctx context.Context, path string, data []byte, o *Owner) error {
	f, _, err := openWrite(path, os.O_WRONLY|os.O_CREATE, false, o, nil)
	if err != nil {
		return err
	}
	if err := write(ctx, f, path, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writePiece is how many bytes Write writes between looks at its context.
const writePiece = 1 << 20

func write(ctx context.Context, f *os.File, path string, data []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	for len(data) > 0 {
		if err := ctx.Err(); err != nil {
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
		n, err := f.Write(data[:min(len(data), writePiece)])
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
