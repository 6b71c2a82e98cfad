package files

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// holeBlock is the granularity of holes: a run of zeros this long, at a
// multiple of it in the file, is skipped rather than written. It is the
// block size of most file systems; a smaller hole would save nothing.
const holeBlock = 4096

// fill writes the content of the current entry of tr to the new file fd.
// A sparse entry's holes, which archive/tar reads as zeros without saying
// where they are, are left as holes again: its runs of zeros are skipped,
// not written. Written bytes count against Limit (the zeros of an entry
// that is not sparse are data, and count); ctx is looked at between
// pieces.
func (x *extractor) fill(fd int, hdr *tar.Header, tr *tar.Reader) error {
	if x.buf == nil {
		x.buf = make([]byte, copyBufferSize)
	}
	sparse := isSparse(hdr)
	var off int64
	for {
		if err := x.ctxErr(); err != nil {
			return err
		}
		n, rerr := io.ReadFull(tr, x.buf)
		write := x.pwrite
		if sparse {
			write = x.writeRuns
		}
		if err := write(fd, hdr.Name, x.buf[:n], off); err != nil {
			return err
		}
		off += int64(n)
		switch {
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			// The entry's end; a cut archive shows at the next header, or
			// as the reader's own error below.
			if off != hdr.Size {
				return badArchive(io.ErrUnexpectedEOF)
			}
			if err := unix.Ftruncate(fd, off); err != nil { // a final hole
				return x.tempError(err, "truncate", hdr.Name)
			}
			return nil
		case rerr != nil:
			return badArchive(rerr) // the body's own errors stay inside, for the caller
		}
	}
}

// isSparse reports whether hdr is that of a sparse file, in any of GNU's
// formats.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// writeRuns writes p, which belongs at off in the file fd, except its
// whole blocks of zeros.
func (x *extractor) writeRuns(fd int, name string, p []byte, off int64) error {
	for len(p) > 0 {
		// Up to the next block boundary, then a run of blocks of one kind.
		n := min(len(p), holeBlock-int(off%holeBlock))
		zero := n == holeBlock && isZero(p[:n])
		for n < len(p) {
			m := min(len(p)-n, holeBlock)
			if (m == holeBlock && isZero(p[n:n+m])) != zero {
				break
			}
			n += m
		}
		if !zero {
			if err := x.pwrite(fd, name, p[:n], off); err != nil {
				return err
			}
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

var zeroBlock [holeBlock]byte

func isZero(p []byte) bool { return bytes.Equal(p, zeroBlock[:len(p)]) }

// pwrite writes p at off in the file fd, counting it against Limit.
func (x *extractor) pwrite(fd int, name string, p []byte, off int64) error {
	if x.opts.Limit > 0 && x.written+int64(len(p)) > x.opts.Limit {
		return fmt.Errorf("%w: its files hold more than the limit of %d bytes", ErrArchiveTooLarge, x.opts.Limit)
	}
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return markNoSpace(&fs.PathError{Op: "write", Path: name, Err: err})
		}
		x.written += int64(n)
		p, off = p[n:], off+int64(n)
	}
	return nil
}
