package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"unicode/utf8"
)

// MaxRead is the largest file Read and Scan accept, in bytes.
const MaxRead = 64 << 20

// ErrTooLarge is wrapped by the error of Read and Scan for a file over
// MaxRead bytes.
var ErrTooLarge = errors.New("file too large")

// chunk is how many bytes Scan and Content.Copy read at a time, and so
// about all the memory a Content holds.
const chunk = 64 << 10

// Content is a regular file that Scan has read once through, so that its
// size and whether it is text are known before any of it is sent. Copy
// sends it. Close releases it.
type Content struct {
	f    *os.File
	path string
	size int64
	utf8 bool
	buf  []byte // at most chunk bytes (see bufferFor), for both passes
	// whole is true when the file fitted in buf, where Scan left it:
	// Copy sends that rather than reading the file again, so a small
	// file (a file of /proc under 64 KiB) is sent as it was scanned.
	whole bool
}

// Scan opens the regular file at path and reads it once through, in
// bounded memory, to learn its size and whether it is valid UTF-8. A file
// over MaxRead bytes gives an error wrapping ErrTooLarge, decided by its
// size before anything is read, or as soon as more than MaxRead bytes
// have been read from a file that grows or reports a wrong size. A named
// pipe, a socket or a device gives an error wrapping ErrNotRegular, a
// directory EISDIR, and nothing of them is read. Scan stops with ctx's
// error between chunks once ctx is done. The file is opened as o (nil:
// the agent): the kernel checks o's rights. The caller closes the
// Content.
func Scan(ctx context.Context, path string, o *Owner) (*Content, error) {
	return scanAtMost(ctx, path, MaxRead, o)
}

// scanAtMost is Scan with the given limit in bytes; tests use small ones.
func scanAtMost(ctx context.Context, path string, limit int64, o *Owner) (*Content, error) {
	var f *os.File
	var fi fs.FileInfo
	err := asOwner(o, func() error {
		var err error
		f, fi, err = openRegular(path, os.O_RDONLY, "read")
		return err
	})
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		f.Close()
		return nil, tooLarge(path, limit)
	}
	c := &Content{f: f, path: path, utf8: true, buf: make([]byte, bufferFor(fi.Size())), whole: true}
	if err := c.scan(ctx, limit); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// scan reads the file to its end, counting its bytes and checking UTF-8
// a buffer at a time; a sequence cut by the end of the buffer is carried
// to the start of the next.
func (c *Content) scan(ctx context.Context, limit int64) error {
	filled := 0 // bytes in c.buf, the carried start of a sequence included
	for {
		if err := ctx.Err(); err != nil {
			return &fs.PathError{Op: "read", Path: c.path, Err: err}
		}
		n, err := c.f.Read(c.buf[filled:])
		filled += n
		c.size += int64(n)
		if c.size > limit {
			return tooLarge(c.path, limit)
		}
		if errors.Is(err, io.EOF) {
			c.utf8 = c.utf8 && utf8.Valid(c.buf[:filled])
			return nil
		}
		if err != nil {
			return err
		}
		if filled < len(c.buf) {
			continue
		}
		c.whole = false
		keep := cutSequence(c.buf)
		c.utf8 = c.utf8 && utf8.Valid(c.buf[:len(c.buf)-keep])
		filled = copy(c.buf, c.buf[len(c.buf)-keep:])
	}
}

// bufferFor returns the size of the buffer for a file whose size is said
// to be size: room for all of a small file (and the EOF after it), so
// that it is read once; a whole chunk for a large one, or for one that
// says 0, as files of /proc do whatever they hold.
func bufferFor(size int64) int {
	if size == 0 || size >= chunk {
		return chunk
	}
	return max(4<<10, int(size)+1)
}

// cutSequence returns the length of the start of a UTF-8 sequence at the
// end of p that more bytes could complete: 0 to 3.
func cutSequence(p []byte) int {
	for i := len(p) - 1; i >= 0 && i > len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return 0
			}
			return len(p) - i
		}
	}
	return 0 // continuation bytes only: invalid whatever follows
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("read %s: %w (the limit is %d bytes)", path, ErrTooLarge, limit)
}

// Size returns the number of bytes Scan read.
func (c *Content) Size() int64 { return c.size }

// UTF8 reports whether the bytes Scan read are valid UTF-8.
func (c *Content) UTF8() bool { return c.utf8 }

// Copy writes the file's content to w, from its start, in pieces of at
// most 64 KiB. It writes at most Size bytes: fewer if the file has shrunk
// since Scan, and never what it has grown by (nor, then, a guarantee that
// it is still valid UTF-8). It stops with ctx's error between pieces once
// ctx is done. It returns the first error of reading or of w.
func (c *Content) Copy(ctx context.Context, w io.Writer) error {
	if c.whole {
		_, err := w.Write(c.buf[:c.size])
		return err
	}
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	for left := c.size; left > 0; {
		if err := ctx.Err(); err != nil {
			return &fs.PathError{Op: "read", Path: c.path, Err: err}
		}
		n, err := c.f.Read(c.buf[:min(int64(len(c.buf)), left)])
		left -= int64(n)
		if n > 0 {
			if _, werr := w.Write(c.buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil // shrunk
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file.
func (c *Content) Close() error { return c.f.Close() }

// Read returns the contents of the file at path, as Scan and Copy would
// send them: at most MaxRead bytes, with the same refusals.
func Read(ctx context.Context, path string) ([]byte, error) {
	return readAtMost(ctx, path, MaxRead)
}

// readAtMost is Read with the given limit in bytes.
func readAtMost(ctx context.Context, path string, limit int64) ([]byte, error) {
	c, err := scanAtMost(ctx, path, limit, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var buf bytes.Buffer
	buf.Grow(int(c.Size()))
	if err := c.Copy(ctx, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
