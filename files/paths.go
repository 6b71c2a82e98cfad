package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/internal/beneath"
)

// ErrNeedsRecursive is Copy's error for a directory copied without
// recursive: the client's mistake.
var ErrNeedsRecursive = errors.New("a directory is copied only with recursive")

// Move renames from to to, as o (nil: the agent; the kernel checks o's
// rights). A missing from is fs.ErrNotExist; an existing to is EEXIST
// unless overwrite, which replaces a file or an empty directory (a
// non-empty one is ENOTEMPTY). The refusal of an existing to is the
// kernel's own (renameat2's RENAME_NOREPLACE), so nothing created
// meanwhile is clobbered. Across file systems, from is copied beside to,
// renamed into place, and then removed; the copies keep their owners
// where the agent may give them (as root), as mv(1) keeps them, else
// they are o's, as Copy makes them. Symbolic links are moved, never
// followed; the directories on the way are resolved as Stage resolves
// them. Parents of to are not created.
func Move(ctx context.Context, from, to string, overwrite bool, o *Owner) error {
	return asOwner(o, func() error {
		src, err := resolvePair(o, from, to, "rename")
		if err != nil {
			return err
		}
		defer src.close()
		if _, err := src.lstatFrom(); err != nil {
			return err
		}
		err = src.rename(overwrite)
		if !errors.Is(err, syscall.EXDEV) {
			return err
		}
		if err := src.copyInto(ctx, overwrite, true, o.uid()); err != nil {
			return err
		}
		return removeAll(ctx, src.fromDir, src.fromName, src.fromPath())
	})
}

// Copy copies from to to, as o: a file with its mode (but for a setuid or
// setgid bit its copy, o's, no longer matches: see treeCopy.copyAt), a
// directory (only with recursive, else ErrNeedsRecursive) with everything in it;
// symbolic links are copied as links, never followed, and special files
// are refused (ErrNotRegular). The copy is made beside to and renamed
// into place whole: an existing to is EEXIST unless overwrite, which
// replaces a file or an empty directory. Copy stops with ctx's error
// between files once ctx is done, leaving nothing behind.
func Copy(ctx context.Context, from, to string, overwrite, recursive bool, o *Owner) error {
	return asOwner(o, func() error {
		src, err := resolvePair(o, from, to, "copy")
		if err != nil {
			return err
		}
		defer src.close()
		st, err := src.lstatFrom()
		if err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && !recursive {
			return fmt.Errorf("copy %s: %w", from, ErrNeedsRecursive)
		}
		return src.copyInto(ctx, overwrite, false, o.uid())
	})
}

// Chmod sets the mode bits of path (permissions, setuid, setgid, sticky:
// mode's low 12 bits, as chmod(2) takes them), as o. A symbolic link at the end is followed as Stage follows
// links.
func Chmod(path string, mode uint32, o *Owner) error {
	return asOwner(o, func() error {
		dir, name, err := newWalker(o, false).resolve(path, "chmod", true)
		if err != nil {
			return err
		}
		defer dir.Close()
		// Through a handle on the file: fchmodat(2) would follow a link
		// another user put at name since resolve looked, and change, as
		// root, the mode of whatever it leads to.
		if err := beneath.Chmod(int(dir.Fd()), name, mode&0o7777); err != nil {
			return &fs.PathError{Op: "chmod", Path: path, Err: err}
		}
		return nil
	})
}

// pair is the source and destination of a move or a copy, each as the
// directory that holds it (open, O_PATH) and its name there.
type pair struct {
	op               string
	from, to         string // as the client wrote them, for errors
	fromDir, toDir   *os.File
	fromDirP, toDirP string // the directories' paths, as resolved
	fromName, toName string
}

func resolvePair(o *Owner, from, to, op string) (*pair, error) {
	p := &pair{op: op, from: from, to: to}
	var err error
	if p.fromDir, p.fromDirP, p.fromName, err = newWalker(o, false).resolveDir(from, op, false); err != nil {
		return nil, err
	}
	if p.toDir, p.toDirP, p.toName, err = newWalker(o, false).resolveDir(to, op, false); err != nil {
		p.fromDir.Close()
		return nil, err
	}
	if p.fromName == "." || p.toName == "." {
		p.close()
		return nil, fmt.Errorf("%w %q -> %q: a path may not end in \".\" or \"..\"", ErrInvalidPath, from, to)
	}
	return p, nil
}

func (p *pair) close() {
	p.fromDir.Close()
	p.toDir.Close()
}

func (p *pair) fromPath() string { return filepath.Join(p.fromDirP, p.fromName) }

func (p *pair) lstatFrom() (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(p.fromDir.Fd()), p.fromName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &fs.PathError{Op: p.op, Path: p.from, Err: err}
	}
	return st, nil
}

// rename renames from to to in one system call.
func (p *pair) rename(overwrite bool) error {
	return p.renameFrom(int(p.fromDir.Fd()), p.fromName, overwrite)
}

// renameFrom renames name, in the directory open as dir, to to.
func (p *pair) renameFrom(dir int, name string, overwrite bool) error {
	flags := uint(0)
	if !overwrite {
		flags = unix.RENAME_NOREPLACE
	}
	err := ignoringEINTR(func() error {
		return unix.Renameat2(dir, name, int(p.toDir.Fd()), p.toName, flags)
	})
	if err != nil {
		return &fs.PathError{Op: p.op, Path: p.to, Err: err}
	}
	return nil
}
