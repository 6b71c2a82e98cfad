package checkpoint

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/internal/beneath"
)

// tree is the directory a checkpoint is of, open once: what is below it
// is opened relative to that descriptor, with no symbolic link followed
// on the way. The agent may read as root a tree another user can write;
// by path, that user could swap a directory of it for a link between the
// scan and the read, and have root read a directory of root's into the
// checkpoint, whose restore would then put it where the user reads it.
// The root itself is opened through a link, as the client named it.
type tree struct {
	path string
	fd   int
}

func openTree(path string) (*tree, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &tree{path: path, fd: fd}, nil
}

func (t *tree) close() { unix.Close(t.fd) }

// abs is the path of rel, as t was opened (for errors, and a restore's
// writes, which resolve it again with the files package's checks).
func (t *tree) abs(rel string) string { return filepath.Join(t.path, filepath.FromSlash(rel)) }

// chmod sets the mode of e's file (mode bits as an Entry holds them),
// without following a link at the end or on the way (ELOOP). A regular
// file that does not have e's owner (or group) does not get its setuid
// (or setgid) bit: a restore whose chown failed (an agent that is not
// root) must not make a setuid program of the agent's user out of a
// file recorded as someone else's.
func (t *tree) chmod(e Entry) error {
	return t.chmodRel(e.Rel, func(st unix.Stat_t) uint32 {
		mode := e.Mode & 0o7777
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Uid != e.UID {
			mode &^= unix.S_ISUID
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Gid != e.GID {
			mode &^= unix.S_ISGID
		}
		return mode
	})
}

// chmodRel sets the mode of rel to what mode returns for its stat,
// without following a link at the end or on the way (ELOOP).
func (t *tree) chmodRel(rel string, mode func(unix.Stat_t) uint32) error {
	if err := beneath.ChmodStat(t.fd, rel, mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: t.abs(rel), Err: err}
	}
	return nil
}

// chtimes sets the access and modification times of rel to mtime
// (nanoseconds); a link at the end gets them itself.
func (t *tree) chtimes(rel string, mtime int64) error {
	ts := unix.NsecToTimespec(mtime)
	if err := beneath.Chtimes(t.fd, rel, ts, ts); err != nil {
		return &fs.PathError{Op: "chtimes", Path: t.abs(rel), Err: err}
	}
	return nil
}

// openDir opens the directory rel ("" for the root) for reading.
func (t *tree) openDir(rel string) (*os.File, error) {
	fd, err := beneath.Open(t.fd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: t.abs(rel), Err: err}
	}
	return os.NewFile(uintptr(fd), t.abs(rel)), nil
}

// openRegular opens the regular file rel for reading, without following
// a link or blocking on a FIFO put in its place, and returns its size.
func (t *tree) openRegular(rel string) (rawFile, int64, error) {
	fd, err := beneath.Open(t.fd, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return -1, 0, &fs.PathError{Op: "open", Path: t.abs(rel), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, 0, &fs.PathError{Op: "open", Path: t.abs(rel), Err: errors.New("not a regular file any more")}
	}
	return rawFile(fd), st.Size, nil
}

// rawFile is a file read through its descriptor alone: an *os.File of a
// descriptor opened non-blocking would try to register it with the
// poller, two system calls more per file, and a checkpoint reads 10,000.
type rawFile int

func (f rawFile) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f rawFile) Close() error { return unix.Close(int(f)) }
