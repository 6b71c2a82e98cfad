package procs

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Status is the state of a background process, as the API names it.
type Status string

// The statuses. A process is StatusKilled only if it died of a signal sent
// through Kill, or its shell exited with 128+n for such a signal n (the
// shell reporting that its child died of it). A process that was sent a
// signal and then exited by itself (SIGCONT, a trapped SIGTERM) has the
// status its exit gives it; one that died of a signal nobody sent through
// Kill is StatusFailed.
const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed" // exited with status 0
	StatusFailed    Status = "failed"    // exited non-zero or died of a signal
	StatusKilled    Status = "killed"    // died of a signal sent through Kill
)

// Process is one background process and its retained output.
type Process struct {
	ID      string
	Command string
	// Name, if not empty, is the name it was started with
	// (StartOptions.Name), which Get takes in place of its id.
	Name string
	// PID is the pid of its first run; Info has the current run's.
	PID       int
	StartedAt time.Time
	Limits    executor.Limits // the command's limits

	// forgotten is set by Registry.Forget, under the Registry's mu, for a
	// process its watch has yet to retire.
	forgotten bool

	done  chan struct{} // closed by finish, after status leaves running
	ready *readyProbe   // nil without StartOptions.Ready
	// cmd and restart are fixed at start: the command each run starts
	// with, and the restart policy, nil if none.
	cmd     executor.Command
	restart *RestartPolicy
	stopc   chan struct{} // closed by stopLocked: no run starts after it
	budget  *budget       // shared by every process of the registry

	// held is ring.footprint() as of p's last change to it, written under
	// mu, so that the budget can weigh p without taking mu.
	held atomic.Int64

	// mu guards everything below. Holding one lock while a batch of lines
	// is stored and subscribers are woken, and while a subscriber copies
	// lines out, is what gives each subscriber one sequence of lines from
	// its backlog into live output: no gap and no duplicate.
	mu          sync.Mutex
	ring        ring
	subs        map[*Subscription]struct{}
	status      Status
	exitCode    int
	completedAt time.Time
	sent        uint64            // bit n-1 is set once signal n was sent while the command ran
	exec        *executor.Process // the current run, or the last one
	pid         int               // exec's pid
	runStart    time.Time         // when exec started
	lastRes     *executor.Result  // how the last run ended; nil before the first ends
	restarts    int               // restarts so far
	nextDelay   time.Duration     // the delay of the next restart; 0 before the first
	waiting     bool              // between two runs
	stopped     bool              // no run starts any more: Kill, or Close
	killedWait  bool              // Kill stopped it while it waited to restart
	events      []eventAt         // the last maxEvents restart events, oldest first
	eventCount  uint64            // restart events ever recorded
	out         outRing           // the raw bytes of every run, for ReadOutput; kept once polled
	clientGone  bool              // the request that owned it left, and had it killed
	cursor      int64             // where the last ReadOutput without a cursor ended
	onExit      func(executor.Result)
}

// Info is a snapshot of a process for listing.
type Info struct {
	ID          string
	PID         int
	Status      Status
	Command     string
	ExitCode    *int // nil while running
	StartedAt   time.Time
	CompletedAt time.Time // zero while running
	Limits      executor.Limits
	// Result is how the command's last run ended (which limit fired, the
	// signal); nil until one has. With a restart policy, a process that
	// restarted is running with the Result of its last run.
	Result *executor.Result
	// Restarts is how many times it restarted; -1 without a restart
	// policy.
	Restarts int
}

// Info returns a snapshot of p.
func (p *Process) Info() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.infoLocked()
}

func (p *Process) infoLocked() Info {
	info := Info{ID: p.ID, PID: p.pid, Status: p.status, Command: p.Command, StartedAt: p.StartedAt,
		CompletedAt: p.completedAt, Limits: p.Limits, Restarts: -1}
	if p.status != StatusRunning {
		code := p.exitCode
		info.ExitCode = &code
	}
	if p.lastRes != nil {
		res := *p.lastRes
		info.Result = &res
	}
	if p.restart != nil {
		info.Restarts = p.restarts
	}
	return info
}

// Done returns a channel that is closed once p has ended and all its
// output is stored.
func (p *Process) Done() <-chan struct{} { return p.done }

// addLines is p's executor.LineFunc: it copies a batch of lines into one
// allocation, stores them and wakes the subscribers. It never blocks on a
// subscriber; if the lines take the budget over its bound, it trims the
// rings, after releasing p.mu.
func (p *Process) addLines(s executor.Stream, t time.Time, lines [][]byte) {
	total := 0
	for _, l := range lines {
		total += len(l)
	}
	arena := make([]byte, 0, total)
	nanos := t.UnixNano()
	p.mu.Lock()
	before := p.ring.footprint()
	for i, l := range lines {
		start := len(arena)
		arena = append(arena, l...)
		p.ring.push(Line{Nanos: nanos, Stream: s, first: i == 0, Data: arena[start:len(arena):len(arena)]})
	}
	delta := p.heldLocked(before)
	p.wakeLocked()
	p.mu.Unlock()
	p.budget.add(delta)
}

// heldLocked updates held after a change to the ring, whose footprint was
// before, and returns by how much it changed, for the budget. p.mu must be
// held.
func (p *Process) heldLocked(before int) int64 {
	delta := int64(p.ring.footprint() - before)
	p.held.Add(delta)
	return delta
}

// wakeLocked tells every subscriber that something changed. A subscriber
// that has not yet taken its last wake-up needs no second one, so the send
// never blocks. p.mu must be held.
func (p *Process) wakeLocked() {
	for sub := range p.subs {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// finish records how p ended and wakes its subscribers so they can end.
func (p *Process) finish(res executor.Result) {
	p.mu.Lock()
	p.exitCode, p.lastRes = res.Code, &res
	p.completedAt = time.Now()
	p.waiting = false
	switch {
	case p.killedWait, p.diedOfSentLocked(res):
		p.status = StatusKilled
	case res.Code == 0:
		p.status = StatusCompleted
	default:
		p.status = StatusFailed
	}
	before := p.ring.footprint()
	p.ring.shrink() // it will grow no more
	delta := p.heldLocked(before)
	close(p.done)
	p.wakeLocked()
	p.mu.Unlock()
	p.budget.add(delta)
}

// diedOfSentLocked reports whether res says the command died of a signal
// sent through Kill: the shell died of it, or exited with 128+n for it, as
// a shell does when the child it waits for dies of signal n. p.mu must be
// held.
func (p *Process) diedOfSentLocked(res executor.Result) bool {
	if res.TimedOut {
		return false
	}
	sig := res.Signal
	if sig == 0 && res.Code > 128 {
		sig = syscall.Signal(res.Code - 128)
	}
	return sig >= 1 && sig <= 64 && p.sent&(1<<(sig-1)) != 0
}

// signal sends sig to p's process group. If the command was running, it
// records sig, so that p is StatusKilled if it dies of it. If the command
// had already exited but left processes in its group, they get sig, p's
// status stays as it was, and exited is true. If the group is empty, it
// returns an error wrapping ErrNotRunning that names the status.
func (p *Process) signal(sig syscall.Signal) (exited bool, err error) {
	p.mu.Lock()
	if p.restart != nil && p.status == StatusRunning {
		// Whatever the policy, no run starts after a kill.
		if p.stopLocked() {
			// Between two runs: nothing to signal, and it ends now.
			p.killedWait = true
			p.mu.Unlock()
			<-p.done
			return false, nil
		}
	}
	select {
	case <-p.exec.Done():
		exited = true
	default:
	}
	// Signal after the command finished reaches what it left in its
	// group, and is ErrFinished only once the group is empty.
	err = p.exec.Signal(sig)
	if err == nil && !exited && sig >= 1 && sig <= 64 {
		p.sent |= 1 << (sig - 1)
	}
	p.mu.Unlock()
	switch {
	case errors.Is(err, executor.ErrFinished):
		<-p.done // the command has finished; finish is about to run, if it has not
		return false, notRunning(p.Info().Status)
	case err != nil:
		return false, err
	case exited:
		<-p.done // so that the status the caller reads next is final
	}
	return exited, nil
}

// trimTo evicts p's oldest lines until its footprint is at most limit, for
// the budget, and returns by how much the footprint changed.
func (p *Process) trimTo(limit int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := p.ring.footprint()
	p.ring.trimTo(int(limit))
	return p.heldLocked(before)
}

// logBytes returns the footprint of p's retained lines.
func (p *Process) logBytes() int {
	return int(p.held.Load())
}

// releaseLogs drops p's retained lines.
func (p *Process) releaseLogs() {
	p.mu.Lock()
	before := p.ring.footprint()
	p.ring.reset()
	p.out.release()
	delta := p.heldLocked(before)
	p.wakeLocked()
	p.mu.Unlock()
	if delta != 0 {
		p.budget.release(delta)
	}
}
