// Package files does the agent's file and directory operations. Errors
// keep the operating system's wording (Go's *fs.PathError text, such as
// "open /x: no such file or directory"), because clients classify
// failures by those words.
package files

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// MaxRead is the largest file Read returns, in bytes.
const MaxRead = 64 << 20

var (
	// ErrTooLarge is wrapped by Read's error for a file over MaxRead bytes.
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular is wrapped by Read's error for a named pipe or a
	// socket, which cannot be read as a file.
	ErrNotRegular = errors.New("named pipes and sockets cannot be read")
)

// Entry describes one file or directory.
type Entry struct {
	Name    string // base name, without the directory
	IsDir   bool   // true for a directory or a symbolic link to one
	Size    int64
	ModTime time.Time   // zero if the file could not be inspected
	Mode    fs.FileMode // of the link's target, for a symbolic link that resolves
}

// Write creates or truncates the file at path and writes data to it, with
// mode 0644 for a new file. Parent directories are not created.
func Write(path string, data []byte) error {
	return os.WriteFile(path, data, 0o644)
}

// Read returns the contents of the file at path. A file over MaxRead bytes
// gives an error wrapping ErrTooLarge. At most MaxRead+1 bytes are ever
// read, so a file that grows while it is read, or a device that never
// ends, cannot exhaust memory.
func Read(path string) ([]byte, error) {
	return readAtMost(path, MaxRead)
}

// readAtMost is Read with the given limit in bytes; tests use small limits.
func readAtMost(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe would otherwise wait, for as long as
	// the request lasts, for a writer that may never come. It changes
	// nothing for regular files.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0 {
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	size := fi.Size()
	if size > limit {
		return nil, tooLarge(path, limit)
	}
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead) // /proc files report 0 and still have content
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(path, limit)
	}
	return buf.Bytes(), nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("read %s: %w (the limit is %d bytes)", path, ErrTooLarge, limit)
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

// DeleteDir removes the directory at path and everything in it, like
// rm -rf. A path that does not exist is success. A path that exists and is
// not a directory gives "remove <path>: not a directory"; a symbolic link
// to a directory counts as one, and only the link is removed, as with
// rm -rf.
func DeleteDir(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return asRemove(path, err)
	case fi.IsDir():
		return os.RemoveAll(path)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := os.Stat(path); err == nil && target.IsDir() {
			return os.Remove(path)
		}
	}
	return &fs.PathError{Op: "remove", Path: path, Err: syscall.ENOTDIR}
}

// asRemove reports err as a failure to remove path, keeping the system's
// wording: "lstat /f/x: not a directory" becomes "remove /f/x: not a
// directory".
func asRemove(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: "remove", Path: path, Err: pe.Err}
	}
	return err
}

// List returns the entries of the directory at path, sorted by name.
// Symbolic links are described by their targets, as Stat does. An entry
// removed while the list is made is left out; one that cannot be
// inspected is listed with its name and type only.
func List(path string) ([]Entry, error) {
	des, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(des))
	for _, de := range des {
		fi, err := de.Info()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if target, serr := os.Stat(filepath.Join(path, de.Name())); serr == nil {
				fi = target
			} // a dangling link is described as the link itself
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			entries = append(entries, Entry{Name: de.Name(), IsDir: de.IsDir(), Mode: de.Type()})
		default:
			entries = append(entries, entry(de.Name(), fi))
		}
	}
	return entries, nil
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
