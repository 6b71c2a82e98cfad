// Package files does the agent's file and directory operations. Errors
// keep the operating system's wording (Go's *fs.PathError text, such as
// "open /x: no such file or directory"), because clients classify
// failures by those words.
package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Entry describes one file or directory.
type Entry struct {
	Name    string // base name, without the directory
	IsDir   bool   // true for a directory or a symbolic link to one
	Size    int64
	ModTime time.Time   // zero if the file could not be inspected
	Mode    fs.FileMode // of the link's target, for a symbolic link that resolves
}

// Delete removes the file or symbolic link at path, as o (nil: the
// agent). It never removes a directory, not even an empty one: that gives
// "remove <path>: is a directory". The directories on the way are
// resolved as Stage resolves them; a link at the end is removed, not
// followed.
func Delete(path string, o *Owner) error {
	return asOwner(o, func() error {
		dir, name, err := newWalker(o, false).resolve(path, "remove", false)
		if err != nil {
			return asRemove(path, err)
		}
		defer dir.Close()
		// unlinkat(2) without AT_REMOVEDIR: it never removes a
		// directory, and a single system call leaves no gap between
		// checking the type and removing.
		err = ignoringEINTR(func() error { return unix.Unlinkat(int(dir.Fd()), name, 0) })
		if err == nil {
			return nil
		}
		// Linux reports EISDIR for a directory; POSIX allows EPERM.
		var st unix.Stat_t
		if errors.Is(err, syscall.EPERM) && unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = syscall.EISDIR
		}
		if name == "." {
			err = syscall.EISDIR
		}
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	})
}

// MakeDir creates the directory at path and any missing parents, with mode
// 0755, like mkdir -p, as o (nil: the agent): what it makes is o's. An
// existing directory is success; an existing file in the way is an
// error. Links on the way are followed as Stage follows them.
func MakeDir(path string, o *Owner) error {
	return asOwner(o, func() error {
		dir, name, err := newWalker(o, true).resolve(path, "mkdir", true)
		if err != nil {
			return err
		}
		defer dir.Close()
		err = ignoringEINTR(func() error { return unix.Mkdirat(int(dir.Fd()), name, 0o755) })
		if err == nil || name == "." {
			return nil
		}
		var st unix.Stat_t
		if errors.Is(err, syscall.EEXIST) {
			if serr := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil &&
				st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return nil
			}
			err = syscall.ENOTDIR
		}
		return &fs.PathError{Op: "mkdir", Path: path, Err: err}
	})
}

// List returns the entries of the directory at path, sorted by name, as
// o sees them (nil: the agent).
// Symbolic links are described by their targets, as Stat does. An entry
// removed while the list is made is left out; one that cannot be
// inspected is listed with its name and type only. It stops with ctx's
// error between entries once ctx is done.
func List(ctx context.Context, path string, o *Owner) ([]Entry, error) {
	var entries []Entry
	err := asOwner(o, func() error {
		var err error
		entries, err = list(ctx, path)
		return err
	})
	return entries, err
}

func list(ctx context.Context, path string) ([]Entry, error) {
	// O_DIRECTORY: the kernel refuses anything else before opening it, so
	// a named pipe cannot block the open and a device is never opened.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries := []Entry{}
	for {
		des, err := f.ReadDir(listBatch)
		for _, de := range des {
			if err := ctx.Err(); err != nil {
				return nil, &fs.PathError{Op: "readdirent", Path: path, Err: err}
			}
			if e, ok := describe(path, de); ok {
				entries = append(entries, e)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries, nil
}

// listBatch is how many names List reads from the directory at a time.
const listBatch = 1024

// describe returns the Entry of de, found in the directory dir, and false
// if it was removed meanwhile.
func describe(dir string, de fs.DirEntry) (Entry, bool) {
	fi, err := de.Info()
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, serr := os.Stat(filepath.Join(dir, de.Name())); serr == nil {
			fi = target
		} // a dangling link is described as the link itself
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Entry{}, false
	case err != nil:
		return Entry{Name: de.Name(), IsDir: de.IsDir(), Mode: de.Type()}, true
	}
	return entry(de.Name(), fi), true
}

// Stat describes the file or directory at path, following symbolic links,
// as o sees it (nil: the agent). Its Name is filepath.Base(path).
func Stat(path string, o *Owner) (Entry, error) {
	var fi fs.FileInfo
	err := asOwner(o, func() error {
		var err error
		fi, err = os.Stat(path)
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	return entry(filepath.Base(path), fi), nil
}

func entry(name string, fi fs.FileInfo) Entry {
	return Entry{Name: name, IsDir: fi.IsDir(), Size: fi.Size(), ModTime: fi.ModTime(), Mode: fi.Mode()}
}

// ignoringEINTR calls fn until it returns something other than EINTR, as
// package os does around its system calls.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
