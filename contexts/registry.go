// Package contexts runs code contexts: interpreters (Python, Node) whose
// state lasts between calls, driven through a small worker written in the
// language itself, which speaks length-prefixed JSON frames with the
// agent over a pipe pair of its own (fds 3 and 4), never over the code's
// stdout and stderr. It knows nothing of HTTP.
package contexts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

var (
	// ErrNotFound is returned for a context id the Registry does not hold.
	ErrNotFound = errors.New("no such context")
	// ErrTooMany is returned by Create past Options.MaxContexts.
	ErrTooMany = errors.New("too many contexts")
	// ErrNoInterpreter is returned by Create when the language's
	// interpreter is not on the agent's PATH; the text names it.
	ErrNoInterpreter = errors.New("interpreter not found")
	// ErrLanguage is returned by Create for a language it does not run.
	ErrLanguage = errors.New(`language must be "python" or "javascript"`)
	// ErrBusy is returned by Run when a call is running and the caller
	// did not ask to queue.
	ErrBusy = errors.New("context is busy")
	// ErrQueueFull is returned by Run when MaxQueue calls wait already.
	ErrQueueFull = errors.New("context queue is full")
	// ErrRestarted is returned by Run when the context's generation is
	// not the one the caller expected; see RestartedError.
	ErrRestarted = errors.New("context was restarted")
	// ErrClosed is returned by Create once Close has begun.
	ErrClosed = errors.New("contexts are shutting down")
	// ErrStart is returned by Create when the interpreter started but its
	// worker did not answer.
	ErrStart = errors.New("interpreter did not start")
	// ErrLimitsTooLow is returned by Create when the interpreter, started
	// with Config.Limits, ended before its worker was ready; the text
	// says how it ended.
	ErrLimitsTooLow = errors.New("the interpreter did not start under its limits")
)

// MaxQueue is how many calls may wait for a busy context.
const MaxQueue = 32

// Options configure a Registry. Zero fields take defaults.
type Options struct {
	// MaxContexts caps the contexts alive at once, a stateless run's
	// included. If zero, 16.
	MaxContexts int
	// MaxOutput caps one rich output (display, result), in bytes. If
	// zero, 8 MiB.
	MaxOutput int
	// StartTimeout bounds an interpreter's start, to its worker's first
	// frame. If zero, 30 s.
	StartTimeout time.Duration
	// Grace is how long interrupted code has to stop before its
	// interpreter is killed and restarted. If zero, 2 s.
	Grace time.Duration
	// LookPath finds an interpreter; if nil, exec.LookPath.
	LookPath func(string) (string, error)
}

// Registry holds the contexts. Create it with NewRegistry; Close kills
// them all.
type Registry struct {
	runner *executor.Runner
	opts   Options
	stop   chan struct{} // closed by Close; ends the janitor
	wg     sync.WaitGroup

	// mu guards byID, slots and closed. slots counts the contexts alive,
	// listed or not.
	mu     sync.Mutex
	byID   map[string]*Context
	slots  int
	closed bool
}

// NewRegistry returns a Registry whose interpreters start from runner's
// environment, through its Reaper if it has one, as its users.
func NewRegistry(runner *executor.Runner, opts Options) *Registry {
	r := &Registry{runner: runner, opts: opts, stop: make(chan struct{}), byID: map[string]*Context{}}
	r.wg.Add(1)
	go r.janitor()
	return r
}

func (r *Registry) maxContexts() int {
	if r.opts.MaxContexts > 0 {
		return r.opts.MaxContexts
	}
	return 16
}

func (r *Registry) maxOutput() int {
	if r.opts.MaxOutput > 0 {
		return r.opts.MaxOutput
	}
	return 8 << 20
}

func (r *Registry) startTimeout() time.Duration {
	if r.opts.StartTimeout > 0 {
		return r.opts.StartTimeout
	}
	return 30 * time.Second
}

func (r *Registry) grace() time.Duration {
	if r.opts.Grace > 0 {
		return r.opts.Grace
	}
	return 2 * time.Second
}

func (r *Registry) lookPath(name string) (string, error) {
	if r.opts.LookPath != nil {
		return r.opts.LookPath(name)
	}
	return exec.LookPath(name)
}

// CheckLanguage returns nil if lang is known and its interpreter is on
// PATH; else ErrLanguage, or an error wrapping ErrNoInterpreter that
// names it.
func (r *Registry) CheckLanguage(lang string) error {
	spec, ok := languages(lang)
	if !ok {
		return ErrLanguage
	}
	if _, err := r.lookPath(spec.binary); err != nil {
		return noInterpreterError(spec.binary)
	}
	return nil
}

// noInterpreterError is ErrNoInterpreter, its text naming the binary.
type noInterpreterError string

func (e noInterpreterError) Error() string        { return string(e) + " not found on PATH" }
func (e noInterpreterError) Is(target error) bool { return target == ErrNoInterpreter }

// env is the environment of cfg's interpreter.
func (r *Registry) env(cfg Config) []string {
	env := cfg.BaseEnv
	if env == nil {
		env = r.runner.Environ()
	} else {
		env = slices.Clone(env)
	}
	if cfg.User != nil && cfg.BaseEnv == nil { // a session's environment has its user's already
		for k, v := range cfg.User.Env() {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range cfg.Env {
		env = append(env, k+"="+v) // exec keeps the last of duplicate keys
	}
	return env
}

// Create starts a context for cfg and returns it once its worker has
// answered. A context with cfg.Hidden is not listed: a stateless run's.
func (r *Registry) Create(ctx context.Context, cfg Config) (*Context, error) {
	spec, ok := languages(cfg.Language)
	if !ok {
		return nil, ErrLanguage
	}
	if err := r.takeSlot(); err != nil {
		return nil, err
	}
	c := newContext(r, newID(), spec, cfg)
	if err := c.start(ctx); err != nil {
		r.giveSlot()
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		c.shutdown()
		r.giveSlot()
		return nil, ErrClosed
	}
	r.byID[c.id] = c
	r.mu.Unlock()
	return c, nil
}

func (r *Registry) takeSlot() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return ErrClosed
	case r.slots >= r.maxContexts():
		return fmt.Errorf("%w (limit %d)", ErrTooMany, r.maxContexts())
	}
	r.slots++
	return nil
}

func (r *Registry) giveSlot() {
	r.mu.Lock()
	r.slots--
	r.mu.Unlock()
}

// Get returns the context id names, or ErrNotFound.
func (r *Registry) Get(id string) (*Context, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byID[id]
	if !ok {
		return nil, ErrNotFound
	}
	return c, nil
}

// List returns the status of every listed context, oldest first.
func (r *Registry) List() []Status {
	r.mu.Lock()
	cs := make([]*Context, 0, len(r.byID))
	for _, c := range r.byID {
		if !c.cfg.Hidden {
			cs = append(cs, c)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(cs, func(a, b *Context) int {
		if d := a.created.Compare(b.created); d != 0 {
			return d
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]Status, len(cs))
	for i, c := range cs {
		out[i] = c.Status()
	}
	return out
}

// Delete removes the context id names and kills its interpreter's
// process group; a running call ends interrupted, with its state lost,
// and queued calls get ErrNotFound.
func (r *Registry) Delete(id string) error {
	r.mu.Lock()
	c, ok := r.byID[id]
	delete(r.byID, id)
	r.mu.Unlock()
	if !ok {
		return ErrNotFound
	}
	c.shutdown()
	r.giveSlot()
	return nil
}

// Close deletes every context and stops the janitor. If ctx ends first,
// it returns ctx.Err().
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.stop)
	}
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, id := range ids {
			_ = r.Delete(id)
		}
		r.wg.Wait()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// janitor runs in its own goroutine; it ends when Close begins. Once a
// second it deletes the contexts idle past their IdleTimeout, and those
// whose Config.Alive says no.
func (r *Registry) janitor() {
	defer r.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			for _, id := range r.idle(now) {
				_ = r.Delete(id)
			}
		}
	}
}

func (r *Registry) idle(now time.Time) []string {
	r.mu.Lock()
	cs := make([]*Context, 0, len(r.byID))
	for _, c := range r.byID {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	var ids []string
	for _, c := range cs {
		if c.idleSince(now) || c.orphaned() {
			ids = append(ids, c.id)
		}
	}
	return ids
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ctx_" + hex.EncodeToString(b[:])
}
