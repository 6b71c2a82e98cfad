package files

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// ErrBadArchive is wrapped by Extract's error for an archive it refuses
// as a whole: one that is not a tar archive (or not gzip, when it should
// be), one cut short, or one with an entry it will not unpack, which the
// error names: `invalid archive: entry "../x": its name leads outside
// the directory`.
var ErrBadArchive = errors.New("invalid archive")

// maxTracked bounds the symbolic links and the directories without owner
// access that one Extract remembers until it has read the whole archive.
// Each costs about a hundred bytes; an archive with more is refused.
const maxTracked = 100_000

// Extracted describes what Extract unpacked.
type Extracted struct {
	Path    string // the directory, as the caller named it
	Entries int    // files, directories and links unpacked
	Size    int64  // bytes of regular files
	Created bool   // the directory did not exist before
}

// ExtractOptions are the settings of Extract. The zero value reads a
// plain tar archive.
type ExtractOptions struct {
	Gzip bool // the archive is compressed with gzip
}

// Extract unpacks the tar archive r holds into the directory dir, creating
// it and its parents if missing (mode 0755). If dir is a symbolic link,
// the directory it leads to is the one unpacked into.
//
// The archive is unpacked into a new temporary directory beside dir (in dir
// itself if dir is a mount point, so that renames stay on one file system)
// and its entries are moved into place only once the whole archive has
// been read and checked: a bad or cut archive, a full disk or ctx ending
// changes nothing in dir. The move itself is a rename per entry: a reader
// may see some of the new entries before others, but never a part of a
// file. Existing files and links are replaced, existing directories
// merged, as tar -x does; a link in dir is replaced, never followed.
//
// Refused, with an error wrapping ErrBadArchive that names the entry:
// absolute names, names with a ".." element, entries reached through a
// symbolic link of the archive, symbolic links whose target leads outside
// dir (following the archive's own links on the way), hard links to
// anything but a regular file of the archive, devices, named pipes, and a
// non-directory where the archive had a directory. A file of the archive
// where dir holds a directory is an EISDIR error. Permission bits (not
// setuid, setgid or sticky) and modification times of files are
// restored; owners are not, nor the times of directories.
func Extract(ctx context.Context, dir string, r io.Reader, opts ExtractOptions) (Extracted, error) {
	dest, err := prepareDest(dir)
	if err != nil {
		return Extracted{}, err
	}
	x := &extractor{ctx: ctx, dest: dest.path, links: map[string]string{}}
	x.root, err = os.MkdirTemp(dest.tmpParent, "."+shorten(filepath.Base(dest.path))+".extract-*")
	if err != nil {
		return Extracted{}, asPath(err, "mkdir", dir)
	}
	defer os.RemoveAll(x.root) // once renamed, it is no longer there
	if err := x.read(r, opts); err != nil {
		return Extracted{}, err
	}
	res := Extracted{Path: dir, Entries: x.entries, Size: x.size, Created: !dest.exists}
	if err := x.place(dest); err != nil {
		return Extracted{}, err
	}
	return res, nil
}

// destination is where Extract unpacks to.
type destination struct {
	path      string // the directory, with a final link followed
	exists    bool
	tmpParent string // where the temporary directory goes
}

// prepareDest finds the directory that Extract unpacks into, creates its
// parents, and picks where the temporary directory goes.
func prepareDest(dir string) (destination, error) {
	target, err := followFinal(dir)
	if err != nil {
		return destination{}, err
	}
	d := destination{path: target, tmpParent: filepath.Dir(target)}
	if err := os.MkdirAll(d.tmpParent, 0o755); err != nil {
		return destination{}, asPath(err, "mkdir", filepath.Dir(dir))
	}
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return d, nil
	case err != nil:
		return destination{}, asPath(err, "open", dir)
	case !fi.IsDir():
		return destination{}, &fs.PathError{Op: "extract", Path: dir, Err: syscall.ENOTDIR}
	}
	d.exists = true
	if parent, err := os.Stat(d.tmpParent); err == nil && sameDevice(fi, parent) {
		return d, nil
	}
	d.tmpParent = target // a mount point: a rename from beside it would fail with EXDEV
	return d, nil
}

func sameDevice(a, b fs.FileInfo) bool {
	sa, oka := statT(a)
	sb, okb := statT(b)
	return oka && okb && sa.Dev == sb.Dev
}

// extractor is the state of one Extract.
type extractor struct {
	ctx  context.Context
	dest string // the directory unpacked into, for absolute link targets
	root string // the temporary directory
	// links maps the name of each symbolic link unpacked so far to its
	// target; restricted the name of each directory whose mode lacks
	// some owner access (it is made with that access meanwhile) to its
	// mode. Both are bounded by maxTracked together.
	links      map[string]string
	restricted []restrictedDir
	entries    int
	size       int64
}

type restrictedDir struct {
	name string
	mode fs.FileMode
}

// read unpacks the whole archive into x.root and checks its links.
func (x *extractor) read(r io.Reader, opts ExtractOptions) error {
	var gz *gzip.Reader
	if opts.Gzip {
		var err error
		if gz, err = gzip.NewReader(r); err != nil {
			return badArchive(err)
		}
		gz.Multistream(false) // what follows the gzip stream is not the archive's
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badArchive(err)
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
	return x.checkLinks()
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
	if err := x.checkParents(hdr.Name, name); err != nil {
		return err
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
	case filepath.IsAbs(name):
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

// checkParents refuses an entry whose path goes through a symbolic link
// of the archive: written through it, a file could land anywhere.
func (x *extractor) checkParents(raw, name string) error {
	for p := filepath.Dir(name); p != "."; p = filepath.Dir(p) {
		if _, ok := x.links[p]; ok {
			return refuse(raw, fmt.Sprintf("it goes through the symbolic link %q of the archive", p))
		}
	}
	return nil
}
