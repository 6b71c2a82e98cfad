// Package cgroups gives each limited command a cgroup v2 leaf of its own,
// with a memory and a pids limit, and reads which of them fired before
// the leaf is removed. It needs a cgroup v2 hierarchy the agent may write
// (a microVM, or a container with a delegated cgroup namespace); Probe
// says whether there is one.
package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrUnavailable is returned by Probe where there is no cgroup v2
// hierarchy with the memory and pids controllers that the agent may
// write; its text is what the API says.
var ErrUnavailable = errors.New("memory and pids limits need a writable cgroup v2 hierarchy")

// FS is the cgroup directory the leaves are made in: the real one (Dir),
// or a fake tree in a temporary directory for tests. Names are relative
// to it.
type FS interface {
	Mkdir(name string) error
	// Remove removes the directory name. In cgroupfs a leaf's files
	// vanish with it; a fake tree removes them too.
	Remove(name string) error
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error
	// Path is the directory name as the system sees it, which a new
	// process is started in (SysProcAttr.CgroupFD).
	Path(name string) string
}

// Dir is the FS of a real cgroup v2 directory.
type Dir string

func (d Dir) Mkdir(name string) error  { return os.Mkdir(d.Path(name), 0o755) }
func (d Dir) Remove(name string) error { return syscall.Rmdir(d.Path(name)) }
func (d Dir) Path(name string) string  { return filepath.Join(string(d), name) }

func (d Dir) ReadFile(name string) ([]byte, error) { return os.ReadFile(d.Path(name)) }

// WriteFile writes data in one write(2), as cgroupfs wants it, to a file
// that exists.
func (d Dir) WriteFile(name string, data []byte) error {
	f, err := os.OpenFile(d.Path(name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Manager makes leaves in one cgroup directory whose subtree has the
// memory and pids controllers enabled.
type Manager struct {
	fs   FS
	next atomic.Uint64
}

// New returns a Manager that makes its leaves in fs, which must already
// have memory and pids in its cgroup.subtree_control (Probe sees to it).
func New(fs FS) *Manager { return &Manager{fs: fs} }

// Limits are what a leaf bounds. A zero field sets no bound.
type Limits struct {
	MemoryBytes int64 // memory.max; swap is then off (memory.swap.max 0)
	Pids        int64 // pids.max
}

// Leaf is the cgroup of one command. Remove it once the command has
// ended, after reading its Events.
type Leaf struct {
	m    *Manager
	name string
}

// NewLeaf makes a leaf with lim set, and memory.oom.group 1 so that an
// OOM kill takes the whole command, not one of its processes.
func (m *Manager) NewLeaf(lim Limits) (*Leaf, error) {
	name := "cmd-" + strconv.FormatUint(m.next.Add(1), 10) + "-" + strconv.Itoa(os.Getpid())
	if err := m.fs.Mkdir(name); err != nil {
		return nil, fmt.Errorf("making cgroup leaf: %w", err)
	}
	l := &Leaf{m: m, name: name}
	var files [][2]string
	if lim.MemoryBytes > 0 {
		mem := strconv.FormatInt(lim.MemoryBytes, 10)
		files = append(files, [2]string{"memory.max", mem}, [2]string{"memory.swap.max", "0"},
			[2]string{"memory.oom.group", "1"})
	}
	if lim.Pids > 0 {
		files = append(files, [2]string{"pids.max", strconv.FormatInt(lim.Pids, 10)})
	}
	for _, f := range files {
		err := m.fs.WriteFile(name+"/"+f[0], []byte(f[1]))
		if err != nil && !(f[0] == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) { // no swap accounting: no swap to bound
			_ = l.Remove()
			return nil, fmt.Errorf("setting %s: %w", f[0], err)
		}
	}
	return l, nil
}

// Path is the leaf's directory, to start a process in.
func (l *Leaf) Path() string { return l.m.fs.Path(l.name) }

// Events are the counters of a leaf that say which limit fired.
type Events struct {
	OOMKills uint64 // memory.events oom_kill
	PidsMax  uint64 // pids.events max: forks refused by pids.max
}

// Events reads the leaf's counters; a missing file counts as zero.
func (l *Leaf) Events() Events {
	var ev Events
	if b, err := l.m.fs.ReadFile(l.name + "/memory.events"); err == nil {
		ev.OOMKills = field(b, "oom_kill")
	}
	if b, err := l.m.fs.ReadFile(l.name + "/pids.events"); err == nil {
		ev.PidsMax = field(b, "max")
	}
	return ev
}

// field returns the value of key in a flat-keyed cgroup file ("key N"
// lines), or 0.
func field(b []byte, key string) uint64 {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(" "))
		if ok && string(k) == key {
			n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// removeTries bounds Remove: the processes cgroup.kill killed leave the
// leaf once they are reaped, which takes a moment.
const removeTries = 50

// Remove kills what is left in the leaf (cgroup.kill) and removes it,
// trying again for up to about half a second while it is busy.
func (l *Leaf) Remove() error {
	_ = l.m.fs.WriteFile(l.name+"/cgroup.kill", []byte("1")) // absent before Linux 5.14: the command's group was killed anyway
	var err error
	for i := 0; i < removeTries; i++ {
		if err = l.m.fs.Remove(l.name); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup leaf %s: %w", l.name, err)
}
