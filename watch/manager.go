package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors the Manager returns.
var (
	// ErrTooMany is returned past Options.MaxWatches.
	ErrTooMany = errors.New("too many watches")
	// ErrTooManyDirs is returned when a new watch would hold more
	// directories than Options.MaxDirs allows.
	ErrTooManyDirs = errors.New("too many watched directories")
	// ErrNotFound is returned for a path that does not exist.
	ErrNotFound = errors.New("no such file or directory")
	// ErrUnknown is returned for a kept watch's id that is not (or no
	// longer) kept.
	ErrUnknown = errors.New("no such watch")
	// ErrClosed is returned once the Manager is closing.
	ErrClosed = errors.New("the watches are shutting down")
)

const (
	// DefaultMaxWatches is Options.MaxWatches's default.
	DefaultMaxWatches = 64
	// DefaultIdleTimeout is how long a kept watch lives unpolled.
	DefaultIdleTimeout = 300 * time.Second
)

// Options configures a Manager; zero fields take defaults.
type Options struct {
	// MaxWatches caps the watches running at once: event streams, kept
	// watches and waits for a path. If zero, DefaultMaxWatches.
	MaxWatches int
	// MaxDirs caps the directories all watches hold together. If zero,
	// three quarters of the system's fs.inotify.max_user_watches
	// (8,192 if it cannot be read), so that other users of inotify keep
	// theirs.
	MaxDirs int
}

// Manager starts watches within its caps and keeps the watches that
// clients poll. Create it with NewManager; Close ends them all.
type Manager struct {
	opts Options
	dirs atomic.Int64 // directories held by all watches

	// mu guards running, kept and closed, and the attached counts and
	// timers of kept watches.
	mu      sync.Mutex
	running int // watches and waits counted against MaxWatches
	live    map[*Watch]struct{}
	kept    map[string]*Kept
	closed  bool
	expires sync.WaitGroup // expire calls in flight; Add only under mu while !closed
}

// NewManager returns a Manager with opts.
func NewManager(opts Options) *Manager {
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = systemMaxDirs()
	}
	return &Manager{opts: opts, live: map[*Watch]struct{}{}, kept: map[string]*Kept{}}
}

func systemMaxDirs() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 8192
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 4 {
		return 8192
	}
	return n / 4 * 3
}

// MaxWatches returns the cap on watches.
func (m *Manager) MaxWatches() int { return m.opts.MaxWatches }

func (m *Manager) maxDirs() int { return m.opts.MaxDirs }

func (m *Manager) takeDir() bool {
	if m.dirs.Add(1) > int64(m.opts.MaxDirs) {
		m.dirs.Add(-1)
		return false
	}
	return true
}

// acquire takes a place among MaxWatches.
func (m *Manager) acquire() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.running >= m.opts.MaxWatches {
		return fmt.Errorf("%w (limit %d, -max-watches)", ErrTooMany, m.opts.MaxWatches)
	}
	m.running++
	return nil
}

func (m *Manager) releaseSlot() {
	m.mu.Lock()
	m.running--
	m.mu.Unlock()
}

// Start starts a watch of spec. The caller closes it.
func (m *Manager) Start(spec Spec) (*Watch, error) {
	if err := m.acquire(); err != nil {
		return nil, err
	}
	w := &Watch{spec: spec, m: m}
	if err := w.start(); err != nil {
		m.releaseSlot()
		if errors.Is(err, ErrTooManyDirs) {
			return nil, fmt.Errorf("%w (limit %d, -max-watched-dirs)", ErrTooManyDirs, m.opts.MaxDirs)
		}
		return nil, err
	}
	m.mu.Lock()
	m.live[w] = struct{}{}
	m.mu.Unlock()
	return w, nil
}

// unregister frees w's place; Watch.Close calls it.
func (m *Manager) unregister(w *Watch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[w]; ok {
		delete(m.live, w)
		m.running--
	}
}

// Kept is a watch the Manager keeps for a client that polls it. It ends
// after Idle without a poll or an attached stream, or on Delete.
type Kept struct {
	ID    string
	Watch *Watch
	Idle  time.Duration
	m     *Manager
	// attached and timer are guarded by m.mu.
	attached int
	timer    *time.Timer
}

// Keep starts a watch of spec and keeps it, for idle (DefaultIdleTimeout
// if zero) after each poll.
func (m *Manager) Keep(spec Spec, idle time.Duration) (*Kept, error) {
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	w, err := m.Start(spec)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	k := &Kept{ID: "w-" + hex.EncodeToString(b[:]), Watch: w, Idle: idle, m: m}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		w.Close()
		return nil, ErrClosed
	}
	m.kept[k.ID] = k
	k.timer = time.AfterFunc(idle, func() { m.expire(k) })
	m.mu.Unlock()
	return k, nil
}

// Get returns the kept watch id, its idle time restarted.
func (m *Manager) Get(id string) (*Kept, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.kept[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknown, id)
	}
	k.timer.Reset(k.Idle)
	return k, nil
}

// Attach marks a stream attached to k, which keeps it alive; the
// function returned detaches it and restarts its idle time.
func (k *Kept) Attach() (detach func()) {
	k.m.mu.Lock()
	k.attached++
	k.m.mu.Unlock()
	return func() {
		k.m.mu.Lock()
		k.attached--
		k.timer.Reset(k.Idle)
		k.m.mu.Unlock()
	}
}

// Touch restarts k's idle time.
func (k *Kept) Touch() {
	k.m.mu.Lock()
	k.timer.Reset(k.Idle)
	k.m.mu.Unlock()
}

// Delete stops and forgets the kept watch id.
func (m *Manager) Delete(id string) error {
	m.mu.Lock()
	k, ok := m.kept[id]
	if ok {
		delete(m.kept, id)
		k.timer.Stop()
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknown, id)
	}
	k.Watch.Close()
	return nil
}

// expire ends k if nothing polled it for its idle time and no stream is
// attached; else it waits another idle time.
//
// expire runs in the timer's goroutine; Close waits for it.
func (m *Manager) expire(k *Kept) {
	m.mu.Lock()
	if m.closed || m.kept[k.ID] != k {
		m.mu.Unlock()
		return
	}
	if k.attached > 0 {
		k.timer.Reset(k.Idle)
		m.mu.Unlock()
		return
	}
	delete(m.kept, k.ID)
	m.expires.Add(1)
	m.mu.Unlock()
	defer m.expires.Done()
	k.Watch.Close()
}

// Close ends every watch, kept or streaming, and refuses new ones. A
// stream's handler sees its watch's Done channel closed.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	ws := make([]*Watch, 0, len(m.live))
	for w := range m.live {
		ws = append(ws, w)
	}
	for _, k := range m.kept {
		k.timer.Stop()
	}
	m.kept = map[string]*Kept{}
	m.mu.Unlock()
	for _, w := range ws {
		w.Close()
	}
	done := make(chan struct{})
	go func() { m.expires.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
