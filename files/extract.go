package files

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrBadArchive is wrapped by Extract's error for an archive it refuses
// as a whole: one that is not a tar archive (or not gzip, when it should
// be), one cut short, or one with an entry it will not unpack, which the
// error names: `invalid archive: entry "../x": its name leads outside
// the directory`.
var ErrBadArchive = errors.New("invalid archive")

// The limits of one Extract. Each error names the limit it passed, and
// nothing is placed.
var (
	// ErrArchiveTooLarge: the files of the archive hold more bytes of
	// data than ExtractOptions.Limit.
	ErrArchiveTooLarge = errors.New("archive too large")
	// ErrArchiveTooManyEntries: the archive has more entries than
	// ExtractOptions.MaxEntries.
	ErrArchiveTooManyEntries = errors.New("archive has too many entries")
	// ErrArchiveTimeout: Extract took longer than
	// ExtractOptions.Timeout.
	ErrArchiveTimeout = errors.New("archive took too long to unpack")
)

// The defaults of ExtractOptions.
const (
	DefaultExtractEntries = 1_000_000
	DefaultExtractTimeout = 30 * time.Minute
)

// maxTracked bounds the directories without owner access that one Extract
// remembers until it has placed the archive. Each costs about a hundred
// bytes; an archive with more is refused.
const maxTracked = 100_000

// maxNameLen is the longest entry name or link target unpacked: Linux's
// PATH_MAX, less its NUL. It bounds the work of each entry.
const maxNameLen = 4095

// Extracted describes what Extract unpacked.
type Extracted struct {
	Path    string // the directory, as the caller named it
	Entries int    // files, directories and links unpacked
	Size    int64  // bytes of regular files, holes included
	Created bool   // the directory did not exist before
}

// ExtractOptions are the settings of Extract. The zero value reads a
// plain tar archive with the default limits, as the agent's own account.
type ExtractOptions struct {
	Gzip bool // the archive is compressed with gzip
	// Owner, if not nil, owns every file, directory and link Extract
	// creates: the archive's entries, the directory if it was missing,
	// and its missing parents. Each is given away by its descriptor, or
	// by name in a directory held open that no other user can change,
	// never by a path. A nil Owner leaves them the agent's.
	Owner *Owner
	// Limit caps the bytes of file data written, all files together:
	// runs of zeros are left as holes, which cost no disk and do not
	// count. Past it, ErrArchiveTooLarge. If zero, there is no cap.
	Limit int64
	// MaxEntries caps the entries (headers) read from the archive. Past
	// it, ErrArchiveTooManyEntries. If zero, DefaultExtractEntries.
	MaxEntries int
	// Timeout bounds the whole Extract, the reading of the archive
	// included. Past it, ErrArchiveTimeout. If zero,
	// DefaultExtractTimeout.
	Timeout time.Duration
}

func (o ExtractOptions) maxEntries() int {
	if o.MaxEntries <= 0 {
		return DefaultExtractEntries
	}
	return o.MaxEntries
}

func (o ExtractOptions) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultExtractTimeout
	}
	return o.Timeout
}

// Extract unpacks the tar archive r holds into the directory dir, creating
// it and its parents if missing (mode 0755). If dir is a symbolic link,
// the directory it leads to is the one unpacked into.
//
// The archive is unpacked into a new temporary directory beside dir (in dir
// itself if dir is a mount point, so that renames stay on one file system),
// which only the agent may enter, and its entries are moved into place
// only once the whole archive has been read and checked: a bad or cut
// archive, a limit passed, a full disk or ctx ending changes nothing in
// dir. The move itself is a rename per entry: a reader may see some of the
// new entries before others, but never a part of a file. Existing files
// and links are replaced, existing directories merged, as tar -x does; a
// link in dir is replaced, never followed. Every operation goes through
// directory descriptors opened without following links, so that another
// user swapping a directory for a link, during the extraction, cannot
// make it write elsewhere: the operation fails instead.
//
// Refused, with an error wrapping ErrBadArchive that names the entry:
// absolute names, names with a ".." element, names or link targets longer
// than 4095 bytes, entries reached through a symbolic link of the
// archive, symbolic links that could lead outside dir (see checkLink),
// hard links to anything but a regular file of the archive, devices, named
// pipes, and a non-directory where the archive had a directory. A file of
// the archive where dir holds a directory is an EISDIR error. Permission
// bits (not setuid, setgid or sticky) and modification times of files are
// restored; owners are not (see ExtractOptions.Owner), nor the times of
// directories. The limits of opts give errors wrapping
// ErrArchiveTooLarge, ErrArchiveTooManyEntries or ErrArchiveTimeout.
func Extract(ctx context.Context, dir string, r io.Reader, opts ExtractOptions) (res Extracted, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, opts.timeout(),
		fmt.Errorf("%w: more than the limit of %s", ErrArchiveTimeout, opts.timeout()))
	defer cancel()
	err = asOwner(opts.Owner, func() error {
		res, err = extract(ctx, dir, r, opts)
		return err
	})
	return res, err
}

// extract is Extract, run as opts.Owner.
func extract(ctx context.Context, dir string, r io.Reader, opts ExtractOptions) (Extracted, error) {
	dest, err := openDest(dir, opts.Owner)
	if err != nil {
		return Extracted{}, err
	}
	placed := false
	defer func() { dest.close(placed) }()
	tmp, err := dest.makeTemp()
	if err != nil {
		return Extracted{}, asPath(err, "mkdir", dir)
	}
	defer tmp.remove() // once placed, only the empty directory is left, if that
	x := &extractor{ctx: ctx, opts: opts, dest: dest.path, tmp: tmp.fd, cached: -1}
	err = x.read(r)
	x.closeCache()
	if err == nil {
		err = x.ctxErr() // the client left, or the time is up, as the archive ended: nothing is placed
	}
	if err != nil {
		return Extracted{}, err
	}
	res := Extracted{Path: dir, Entries: x.entries, Size: x.size, Created: dest.dir < 0}
	if err := x.place(dest, tmp); err != nil {
		return Extracted{}, err
	}
	placed = true
	return res, nil
}

// extractor is the state of one Extract.
type extractor struct {
	ctx  context.Context
	opts ExtractOptions
	dest string // the directory unpacked into, for absolute link targets
	tmp  int    // the temporary directory
	// cachedDir is the directory of the last entry, relative to tmp, and
	// cached its descriptor (-1 if none): entries mostly come directory
	// by directory. Directories are never removed from the temporary
	// tree (see makeRoom), so it stays the right one.
	cachedDir string
	cached    int
	// restricted lists the directories whose mode lacks some owner
	// access (each is made with that access meanwhile), with their mode.
	restricted []restrictedDir
	headers    int   // headers read, against MaxEntries
	entries    int   // entries unpacked
	size       int64 // bytes of regular files
	written    int64 // bytes of file data written, against Limit
	buf        []byte
}

type restrictedDir struct {
	name string
	mode uint32
}

// ctxErr returns why x.ctx is done (ErrArchiveTimeout's error for the
// time limit), or nil.
func (x *extractor) ctxErr() error {
	if x.ctx.Err() == nil {
		return nil
	}
	return context.Cause(x.ctx)
}

// read unpacks the whole archive into the temporary directory.
func (x *extractor) read(r io.Reader) error {
	var gz *gzip.Reader
	if x.opts.Gzip {
		var err error
		if gz, err = gzip.NewReader(r); err != nil {
			return badArchive(err)
		}
		gz.Multistream(false) // what follows the gzip stream is not the archive's
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		if err := x.ctxErr(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badArchive(err)
		}
		if x.headers++; x.headers > x.opts.maxEntries() {
			return fmt.Errorf("%w: more than the limit of %d", ErrArchiveTooManyEntries, x.opts.maxEntries())
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	if gz != nil {
		// The end of the tar archive is not the end of the gzip stream,
		// whose checksum comes last: a corrupt archive must not pass.
		if _, err := io.Copy(io.Discard, io.LimitReader(gz, 1<<20)); err != nil {
			return badArchive(err)
		}
	}
	return nil
}

func badArchive(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // a stream that ends before the archive does is cut
	}
	return fmt.Errorf("%w: %w", ErrBadArchive, err)
}

// refuse is the error for an entry the archive may not have.
func refuse(name, reason string) error {
	return fmt.Errorf("%w: entry %q: %s", ErrBadArchive, name, reason)
}

// entry unpacks one entry of the archive.
func (x *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	name, err := entryName(hdr.Name)
	if err != nil || name == "" {
		return err // "" is the root itself ("./"): dir exists or will
	}
	if len(hdr.Linkname) > maxNameLen {
		return refuse(hdr.Name, fmt.Sprintf("its link target is longer than %d bytes", maxNameLen))
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse: // the reader turns TypeRegA into TypeReg or TypeDir
		err = x.file(name, hdr, tr)
	case tar.TypeDir:
		err = x.dir(name, hdr)
	case tar.TypeSymlink:
		err = x.symlink(name, hdr)
	case tar.TypeLink:
		err = x.hardLink(name, hdr)
	case tar.TypeXGlobalHeader:
		return nil // PAX defaults for the entries that follow; Next applies them
	case tar.TypeChar, tar.TypeBlock:
		return refuse(hdr.Name, "devices are not unpacked")
	case tar.TypeFifo:
		return refuse(hdr.Name, "named pipes are not unpacked")
	default:
		return refuse(hdr.Name, fmt.Sprintf("entries of type %q are not unpacked", hdr.Typeflag))
	}
	if err == nil {
		x.entries++
	}
	return err
}

// entryName returns the clean form of an entry's name, "" for the root
// ("./"), or the error that refuses it.
func entryName(name string) (string, error) {
	switch {
	case name == "":
		return "", refuse(name, "it has no name")
	case len(name) > maxNameLen:
		return "", refuse(name[:64]+"...", fmt.Sprintf("its name is longer than %d bytes", maxNameLen))
	case strings.HasPrefix(name, "/"):
		return "", refuse(name, "its name is absolute")
	}
	if slices.Contains(strings.Split(name, "/"), "..") {
		return "", refuse(name, "its name has a .. element")
	}
	clean := filepath.Clean(name)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}
