package sessions

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// maxState bounds the state file the agent reads, and so a session's
// environment: a state over it is not committed. The kernel refuses a
// command whose arguments and environment pass a quarter of the stack
// limit (2 MiB by default), so a larger environment could start nothing.
const maxState = 1 << 20

// maxIdleStateFiles is how many idle state files a pool keeps per owner.
const maxIdleStateFiles = 32

// errStateTooLarge is stateFile.read's error for a state over maxState.
var errStateTooLarge = errors.New("session state too large")

// stateFile is a file in which a session command's shell leaves its
// state. The agent keeps it open, reads it through its descriptor once
// the shell has exited, empties it and reuses it for the next command of
// the same owner: creating and removing a file per command costs several
// times the system calls.
type stateFile struct {
	path  string
	fd    int    // O_RDWR, close-on-exec: never a command's
	owner [2]int // uid, gid; -1, -1 for the agent's own
	buf   []byte // reused by read
}

// statePool makes and keeps the state files of a Registry, in its state
// directory (mode 0711, the agent's): a file is made ahead by the agent,
// owned by the command's user and readable by it alone, in a directory no
// one else may write to, so it cannot be a link planted elsewhere.
type statePool struct {
	dir string
	seq atomic.Uint64

	// mu guards idle and closed.
	mu     sync.Mutex
	idle   map[[2]int][]*stateFile
	closed bool
}

// get returns an empty state file owned by u (the agent, if nil).
func (p *statePool) get(u *executor.User) (*stateFile, error) {
	owner := [2]int{-1, -1}
	if u != nil {
		owner = [2]int{int(u.UID), int(u.GID)}
	}
	p.mu.Lock()
	if files := p.idle[owner]; len(files) > 0 {
		f := files[len(files)-1]
		p.idle[owner] = files[:len(files)-1]
		p.mu.Unlock()
		return f, nil
	}
	p.mu.Unlock()
	path := p.dir + "/" + strconv.FormatUint(p.seq.Add(1), 36)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	if u != nil {
		if err := unix.Fchown(fd, owner[0], owner[1]); err != nil {
			_ = unix.Close(fd)
			_ = unix.Unlink(path)
			return nil, &os.PathError{Op: "chown", Path: path, Err: err}
		}
	}
	return &stateFile{path: path, fd: fd, owner: owner}, nil
}

// put empties f and keeps it for reuse, or removes it if it cannot be
// emptied, the pool has enough, or the pool is closed.
func (p *statePool) put(f *stateFile) {
	if cap(f.buf) > 64<<10 {
		f.buf = nil // a large state once is no reason to hold its memory
	}
	ok := unix.Ftruncate(f.fd, 0) == nil
	p.mu.Lock()
	if ok && !p.closed && len(p.idle[f.owner]) < maxIdleStateFiles {
		if p.idle == nil {
			p.idle = map[[2]int][]*stateFile{}
		}
		p.idle[f.owner] = append(p.idle[f.owner], f)
		f = nil
	}
	p.mu.Unlock()
	if f != nil {
		f.remove()
	}
}

// close removes the idle files; files in use are removed when put.
func (p *statePool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, files := range idle {
		for _, f := range files {
			f.remove()
		}
	}
}

func (f *stateFile) remove() {
	_ = unix.Close(f.fd)
	_ = unix.Unlink(f.path)
}

// read returns what the shell wrote to f, at most maxState bytes. The
// slice is f's and valid until f is read again.
func (f *stateFile) read() ([]byte, error) {
	if f.buf == nil {
		f.buf = make([]byte, 0, 8<<10)
	}
	b := f.buf[:0]
	for {
		if len(b) == cap(b) {
			if len(b) > maxState {
				return nil, errStateTooLarge
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Pread(f.fd, b[len(b):cap(b)], int64(len(b)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: f.path, Err: err}
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	f.buf = b
	if len(b) > maxState {
		return nil, errStateTooLarge
	}
	return b, nil
}
