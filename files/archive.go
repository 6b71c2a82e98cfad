package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ErrArchiveSource is wrapped by WriteArchive's error when the tree could
// not be read as it was being archived: a file or directory vanished, could
// not be opened or read, or shrank. The archive written so far then lacks
// its end, and must not be taken for a whole one.
var ErrArchiveSource = errors.New("the tree could not be archived")

// ArchiveOptions are the settings of WriteArchive. The zero value writes
// a plain tar archive.
type ArchiveOptions struct {
	// Gzip compresses the archive with gzip.
	Gzip bool
	// GzipLevel is gzip's compression level, from gzip.BestSpeed (1) to
	// gzip.BestCompression (9). If zero, gzip.DefaultCompression (6),
	// the level of gzip and tar -z: on a tree of small text files it
	// costs little more time than level 1 and gives a smaller archive.
	GzipLevel int
}

func (o ArchiveOptions) gzipLevel() int {
	if o.GzipLevel == 0 {
		return gzip.DefaultCompression
	}
	return o.GzipLevel
}

// WriteArchive writes the tree under the directory dir to w as a tar
// archive, each entry named relative to dir ("a.txt", "sub/", "sub/b.txt";
// dir itself has no entry). Symbolic links are stored as links, never
// followed; named pipes and devices as entries without content, as tar
// stores them; sockets are left out. Permissions, modification times and
// numeric owners are kept.
//
// If the tree cannot be read as it is archived (an entry vanishes, cannot
// be opened or read, or shrinks), WriteArchive stops at once and returns
// an error wrapping ErrArchiveSource that names the entry, without ending
// the archive: after the last whole entry (or inside the file that
// failed) it writes a block that is not a tar header (see abortBlock) and
// no end-of-archive blocks, nor gzip's trailer: what w has received is an
// archive that tar and gzip reject, never a whole one with a file missing. A failure to write to w
// is returned as w gave it. WriteArchive stops with ctx's error between
// entries and pieces of files once ctx is done.
func WriteArchive(ctx context.Context, w io.Writer, dir string, opts ArchiveOptions) error {
	var gz *gzip.Writer
	if opts.Gzip {
		var err error
		if gz, err = gzip.NewWriterLevel(w, opts.gzipLevel()); err != nil {
			return err
		}
		w = gz
	}
	a := &archiver{ctx: ctx, tw: tar.NewWriter(w), buf: make([]byte, chunk)}
	if err := a.walk(dir, ""); err != nil {
		if errors.Is(err, ErrArchiveSource) {
			_ = a.tw.Flush() // the padding of the last whole entry; fails inside a file, leaving it cut
			_, _ = w.Write(abortBlock(err))
			if gz != nil {
				_ = gz.Flush() // so that the block reaches the client; no trailer follows
			}
		}
		return err
	}
	if err := a.tw.Close(); err != nil {
		return err
	}
	if gz != nil {
		return gz.Close()
	}
	return nil
}

// abortBlock returns the block that ends an archive cut by err: 512 bytes
// that no tar reader takes for a header (the checksum field is not a
// number), which begin with "sandbox-executor: archive incomplete: "
// and err's words, so that a person looking at the bytes sees why.
func abortBlock(err error) []byte {
	b := bytes.Repeat([]byte{'\n'}, 512)
	copy(b[:148], "sandbox-executor: archive incomplete: "+err.Error())
	copy(b[148:156], "!!!!!!!!")
	return b
}

// archiver is the state of one WriteArchive.
type archiver struct {
	ctx context.Context
	tw  *tar.Writer
	buf []byte // for copying files
}

// sourceError reports the failure err to read the tree, at path.
func sourceError(err error) error {
	return fmt.Errorf("%w: %w", ErrArchiveSource, err)
}

// walk archives the entries of the directory at path, whose name in the
// archive is rel ("" for the root, else ending in "/"). It reads the
// directory listing listBatch names at a time, so that a directory of a
// million entries costs no more memory than a small one.
func (a *archiver) walk(path, rel string) error {
	flag := os.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	if rel != "" {
		flag |= syscall.O_NOFOLLOW // the root may be a link the caller named; nothing below it is followed
	}
	d, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return sourceError(err)
	}
	defer d.Close()
	for {
		des, err := d.ReadDir(listBatch)
		for _, de := range des {
			if err := a.entry(filepath.Join(path, de.Name()), rel+de.Name()); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return sourceError(err)
		}
	}
}

// entry archives the file, link or directory at path under the name rel.
func (a *archiver) entry(path, rel string) error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return sourceError(err)
	}
	switch t := fi.Mode().Type(); {
	case t == 0:
		return a.file(path, rel)
	case t == fs.ModeSocket:
		return nil // tar leaves them out too: they cannot be recreated
	case t == fs.ModeDir:
		if err := a.header(fi, rel+"/", ""); err != nil {
			return err
		}
		return a.walk(path, rel+"/")
	case t == fs.ModeSymlink:
		link, err := os.Readlink(path)
		if err != nil {
			return sourceError(err)
		}
		return a.header(fi, rel, link)
	}
	return a.header(fi, rel, "") // a named pipe or a device: no content
}

// header writes the header of the entry described by fi, named name.
func (a *archiver) header(fi fs.FileInfo, name, link string) error {
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return sourceError(fmt.Errorf("%s: %w", name, err))
	}
	hdr.Name = name
	// Truncated, as tar does: rounded up, a time just written would be
	// in the future, which tar -x warns about.
	hdr.ModTime = hdr.ModTime.Truncate(time.Second)
	return a.tw.WriteHeader(hdr)
}

// file archives the regular file at path under the name rel: exactly the
// size it has when it is opened (what it grows by after is left out;
// shrinking is an error).
func (a *archiver) file(path, rel string) error {
	// O_NOFOLLOW and O_NONBLOCK: what was a regular file a moment ago may
	// now be a link or a named pipe, which must neither be followed nor
	// wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return sourceError(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return sourceError(err)
	}
	if !fi.Mode().IsRegular() {
		return sourceError(&fs.PathError{Op: "read", Path: path, Err: errors.New("no longer a regular file")})
	}
	if err := a.header(fi, rel, ""); err != nil {
		return err
	}
	for left := fi.Size(); left > 0; {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		n, err := f.Read(a.buf[:min(int64(len(a.buf)), left)])
		left -= int64(n)
		if n > 0 {
			if _, werr := a.tw.Write(a.buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case errors.Is(err, io.EOF) && left > 0:
			return sourceError(fmt.Errorf("read %s: the file shrank by %d bytes while it was archived", path, left))
		case err != nil && !errors.Is(err, io.EOF):
			return sourceError(err)
		}
	}
	return nil
}
