// Package procs keeps the background processes of the agent: it starts
// them, retains the recent lines of each in a bounded ring, lets any number
// of readers follow those lines without ever holding up a process, and
// bounds what finished processes keep.
package procs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/finished"
	"github.com/sandbox-executor/sandbox-executor/internal/logfield"
	"github.com/sandbox-executor/sandbox-executor/internal/waitgroup"
)

var (
	// ErrNotFound is returned for an id the registry does not know.
	ErrNotFound = errors.New("process not found")
	// ErrNotRunning is returned by Kill for a process that has ended and
	// left nothing running in its group.
	ErrNotRunning = errors.New("process is not running")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("process registry closed")
	// ErrTooMany is returned by Start while Options.MaxRunning processes
	// run; the error text names the limit. It is the server's fault, not
	// the request's, and passes once a process ends.
	ErrTooMany = errors.New("too many running background processes")
)

func notFound(id string) error       { return fmt.Errorf("%w: %s", ErrNotFound, id) }
func notRunning(status Status) error { return fmt.Errorf("%w (status: %s)", ErrNotRunning, status) }

// reclaimInterval is the least time between two returns of memory to the
// system: each costs a full garbage collection.
const reclaimInterval = 10 * time.Second

// Registry holds the background processes. Close kills those still
// running and waits for them.
type Registry struct {
	runner *executor.Runner
	opts   Options
	budget *budget
	wg     sync.WaitGroup // one per watch goroutine, and budget.reclaim
	quit   chan struct{}  // closed by Close, to end budget.reclaim

	// mu guards the fields below. It is never acquired while a Process's
	// mu, or the budget's, is held.
	mu       sync.Mutex
	procs    map[string]*Process
	names    map[string]*Process     // the newest process that had each name
	order    []*Process              // in start order, for List
	finished finished.List[*Process] // in finish order, those still listed
	running  int                     // started and not yet finished
	started  uint64                  // started since NewRegistry
	closed   bool
}

// NewRegistry returns a Registry that starts processes with runner. Its
// Close must be called: it also ends the goroutine that returns released
// memory to the system.
func NewRegistry(runner *executor.Runner, opts Options) *Registry {
	r := &Registry{
		runner: runner,
		opts:   opts,
		budget: newBudget(int64(opts.maxTotalBytes()), reclaimInterval, debug.FreeOSMemory),
		quit:   make(chan struct{}),
		procs:  map[string]*Process{},
		names:  map[string]*Process{},
	}
	r.wg.Add(1)
	go r.reclaim()
	return r
}

// reclaim runs in its own goroutine, started by NewRegistry; it ends when
// Close closes quit. See budget.reclaim.
func (r *Registry) reclaim() {
	defer r.wg.Done()
	r.budget.reclaim(r.quit)
}

// Stats are a Registry's counts, for metrics.
type Stats struct {
	Running  int    // processes running now
	Finished int    // finished processes still listed
	Started  uint64 // processes started since the Registry was created
	// MaxRunning is Options.MaxRunning or its default.
	MaxRunning int
	// LogBytes is what the retained lines of every process cost now, as
	// Options.MaxTotalBytes counts it; LogBudget is that bound.
	LogBytes, LogBudget int64
}

// Stats returns the Registry's counts now.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Running: r.running, Finished: r.finished.Len(), Started: r.started, MaxRunning: r.opts.maxRunning(),
		LogBytes: r.budget.total.Load(), LogBudget: r.budget.max}
}

// maxLogCommand bounds the command a log line shows, in bytes.
const maxLogCommand = 256

// logCommand returns cmd cut to at most maxLogCommand bytes, at a UTF-8
// boundary, for a log line.
func logCommand(cmd string) string {
	if len(cmd) <= maxLogCommand {
		return cmd
	}
	n := maxLogCommand
	for n > 0 && !utf8.RuneStart(cmd[n]) {
		n--
	}
	return cmd[:n] + "…"
}

// PollBytes returns how many output bytes a polled process keeps:
// Options.MaxPollBytes or its default.
func (r *Registry) PollBytes() int { return r.opts.maxPollBytes() }

// LogBudget returns the bound on the retained lines of all processes
// together, in bytes: Options.MaxTotalBytes or its default.
func (r *Registry) LogBudget() int { return r.opts.maxTotalBytes() }

// Start starts c in the background. The process outlives the request that
// asked for it: it ends by itself, by Kill, or by Close. c.Timeout, if
// set, applies as for any command.
func (r *Registry) Start(c executor.Command) (*Process, error) {
	return r.StartWith(c, StartOptions{})
}

// start starts c and registers the process; r.wg counts its watch and its
// readiness probe, which the caller starts.
func (r *Registry) start(c executor.Command, o StartOptions) (*Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if limit := r.opts.maxRunning(); r.running >= limit {
		return nil, fmt.Errorf("%w (limit %d)", ErrTooMany, limit)
	}
	if err := r.claimNameLocked(o.Name); err != nil {
		return nil, err
	}
	p := &Process{
		ID:        uuid.NewString(),
		Command:   cmp.Or(o.Command, c.String()),
		StartedAt: time.Now().UTC(),
		Limits:    c.Limits,
		done:      make(chan struct{}),
		budget:    r.budget,
		ring:      newRing(r.opts.maxLines(), r.opts.maxBytes()),
		subs:      map[*Subscription]struct{}{},
		status:    StatusRunning,
		Name:      o.Name,
		cmd:       c,
		restart:   o.Restart,
		stopc:     make(chan struct{}),
		onExit:    o.OnExit,
	}
	if o.Polled {
		p.out.keep(r.opts.maxPollBytes())
	}
	r.budget.join(p) // before its first line
	// Background processes belong to the registry, not to a request:
	// Close, not a request's context, ends them.
	ex, err := r.runner.StartTee(context.Background(), c, p.addLines, p.addRaw)
	if err != nil {
		r.budget.leave(p)
		return nil, err
	}
	p.exec, p.PID, p.pid, p.runStart = ex, ex.Pid(), ex.Pid(), time.Now()
	p.cmd.Input = "" // the command holds it until written; a restart sends none
	if o.Ready != nil {
		p.ready = &readyProbe{spec: *o.Ready, passed: make(chan struct{}), ended: make(chan struct{})}
		r.wg.Add(1)
	}
	r.procs[p.ID] = p
	if p.Name != "" {
		r.names[p.Name] = p
	}
	r.order = append(r.order, p)
	r.running++
	r.started++
	r.wg.Add(1)
	return p, nil
}

// watch runs in its own goroutine, one per process; it ends when the
// process has ended and its output has been stored.
func (r *Registry) watch(p *Process) {
	defer r.wg.Done()
	var res executor.Result
	for {
		ex := p.current()
		res = ex.Wait()
		p.mu.Lock()
		ran := time.Since(p.runStart)
		p.mu.Unlock()
		delay, again := p.nextRun(res, ran)
		if !again || !r.rerun(p, delay) {
			break
		}
	}
	if p.onExit != nil {
		p.onExit(res) // the last run's: a session commits its state once
	}
	p.finish(res)
	if ev := r.opts.Log.Debug(); ev.Enabled() {
		info := p.Info()
		ev.Str("id", p.ID).Int("pid", p.PID).Str("command", logCommand(p.Command)).Int("exit_code", res.Code).
			Str("status", string(info.Status)).Float64("duration_ms", logfield.DurationMS(info.CompletedAt.Sub(p.StartedAt))).
			Msg("process exited")
	}
	for _, old := range r.retire(p) {
		old.releaseLogs()
		r.budget.leave(old)
	}
}

// retire applies the finished-process bounds after p has finished, and
// returns the processes it forgot, whose lines the caller releases.
func (r *Registry) retire(p *Process) (forgotten []*Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	if p.forgotten {
		return []*Process{p} // Forget took it out of the list already
	}
	forgotten = r.finished.Add(p, finished.Bounds[*Process]{MaxItems: r.opts.maxFinished(),
		MaxBytes: r.opts.maxFinishedBytes(), Bytes: (*Process).logBytes, Release: (*Process).releaseLogs})
	for _, old := range forgotten {
		delete(r.procs, old.ID)
		r.forgetNameLocked(old)
		r.order = slices.DeleteFunc(r.order, func(q *Process) bool { return q == old })
	}
	return forgotten
}

// Get returns the process with the given id, or else the newest process
// that had that name (StartOptions.Name), running or not; or an error
// wrapping ErrNotFound.
func (r *Registry) Get(id string) (*Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[id]
	if !ok {
		if p, ok = r.names[id]; !ok {
			return nil, notFound(id)
		}
	}
	return p, nil
}

// List returns a snapshot of every listed process, in start order.
func (r *Registry) List() []Info {
	r.mu.Lock()
	procs := slices.Clone(r.order)
	r.mu.Unlock()
	infos := make([]Info, len(procs))
	for i, p := range procs {
		infos[i] = p.Info()
	}
	return infos
}

// Kill sends sig to the process group of the process with the given id.
// If the process is running, it is StatusKilled if it then dies of sig.
// For SIGKILL Kill waits, until ctx ends, for the process to be gone, so
// the next List shows it killed. If the process had already ended but
// left processes in its group, they get sig, its status stays, and exited
// is true. It returns an error wrapping ErrNotFound for an unknown id, or
// ErrNotRunning (naming the status) if the process has ended and its group
// is empty.
func (r *Registry) Kill(ctx context.Context, id string, sig syscall.Signal) (exited bool, err error) {
	p, err := r.Get(id)
	if err != nil {
		return false, err
	}
	if exited, err = p.signal(sig); err != nil || exited {
		return exited, err
	}
	if sig == syscall.SIGKILL {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
	return false, nil
}

// Close stops Start, kills the process group of every running process and
// waits until they have ended and their output is stored, or until ctx
// ends.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	if !r.closed {
		close(r.quit)
	}
	r.closed = true
	procs := slices.Clone(r.order)
	r.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		p.stopLocked() // no restart: a process waiting for one ends now
		ex := p.exec
		p.mu.Unlock()
		_ = ex.Signal(syscall.SIGKILL) // ErrFinished for those already done
	}
	// SIGKILL and the executor's bounded drain make the last watch end
	// within seconds, even if ctx ends first.
	return waitgroup.Wait(ctx, &r.wg)
}
