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
)

// Entry describes one file or directory.
type Entry struct {
	Name    string // base name, without the directory
	IsDir   bool   // true for a directory or a symbolic link to one
	Size    int64
	ModTime time.Time   // zero if the file could not be inspected
	Mode    fs.FileMode // of the link's target, for a symbolic link that resolves
}

// Delete removes the file or symbolic link at path. It never removes a
// directory, not even an empty one: that gives "remove <path>: is a
// directory".
func Delete(path string) error {
	// unlink(2) rather than os.Remove, which falls back to rmdir(2) and
	// would remove an empty directory. A single system call also leaves
	// no gap between checking the type and removing.
	err := ignoringEINTR(func() error { return syscall.Unlink(path) })
	if err == nil {
		return nil
	}
	// Linux reports EISDIR for a directory; POSIX allows EPERM.
	if errors.Is(err, syscall.EPERM) {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() {
			err = syscall.EISDIR
		}
	}
	return &fs.PathError{Op: "remove", Path: path, Err: err}
}

// MakeDir creates the directory at path and any missing parents, with mode
// 0755, like mkdir -p. An existing directory is success; an existing file
// in the way is an error.
func MakeDir(path string) error {
	return os.MkdirAll(path, 0o755)
}

// List returns the entries of the directory at path, sorted by name.
// Symbolic links are described by their targets, as Stat does. An entry
// removed while the list is made is left out; one that cannot be
// inspected is listed with its name and type only. It stops with ctx's
// error between entries once ctx is done.
func List(ctx context.Context, path string) ([]Entry, error) {
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

// Stat describes the file or directory at path, following symbolic links.
// Its Name is filepath.Base(path).
func Stat(path string) (Entry, error) {
	fi, err := os.Stat(path)
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
