package procs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// The restart policies.
const (
	RestartNever     = "never"
	RestartOnFailure = "on-failure" // after a non-zero exit, or a signal nobody sent through Kill
	RestartAlways    = "always"
)

// backoffReset is how long a run must last for the next delay to start
// again from RestartPolicy.Backoff.
const backoffReset = 60 * time.Second

// maxEvents bounds the restart events a process keeps for its readers.
const maxEvents = 1000

// RestartPolicy says when a background process that ended starts again,
// with the same id, command, directory, environment, user and limits, and
// its log continuing: after a delay that doubles from Backoff up to
// MaxBackoff, and starts again from Backoff after a run of 60 s or more.
// Kill stops it for good, whatever the policy.
type RestartPolicy struct {
	Policy      string        // RestartNever, RestartOnFailure or RestartAlways
	MaxRestarts int           // restarts allowed in all; -1: no limit
	Backoff     time.Duration // the first delay
	MaxBackoff  time.Duration // the longest delay
}

// RestartEvent is what a process's readers are told between two runs: it
// comes after the last line of the run that ended, when the restart is
// scheduled, before the delay.
type RestartEvent struct {
	Restart     int                  `json:"restart"` // 1 for the first restart
	ExitCode    *int                 `json:"exit_code,omitempty"`
	Termination executor.Termination `json:"termination"`
	DelayMS     int64                `json:"delay_ms"`
}

// eventAt is a restart event and where it falls among the lines: after
// line after.
type eventAt struct {
	n     uint64 // events numbered from 1, in order
	after uint64
	nanos int64  // when it was recorded
	json  []byte // the RestartEvent
}

// Termination is why a command that ended with res ended, with no
// signal sent through the API and no client gone: the limit that fired,
// else its timeout, its own exit, or a signal (see
// executor.Result.Termination, the one computation of it).
func Termination(res executor.Result) executor.Termination {
	return res.Termination(nil, false)
}

// nextRun decides, once a run of p has ended with res, whether p starts
// again and after what delay; if so it records the restart event and
// wakes the readers. It is called by watch only.
func (p *Process) nextRun(res executor.Result, ran time.Duration) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastRes = &res
	pol := p.restart
	if pol == nil || p.stopped || pol.Policy == RestartNever || p.diedOfSentLocked(res) {
		return 0, false
	}
	if pol.Policy == RestartOnFailure && res.Code == 0 {
		return 0, false
	}
	if pol.MaxRestarts >= 0 && p.restarts >= pol.MaxRestarts {
		return 0, false
	}
	if ran >= backoffReset || p.nextDelay == 0 {
		p.nextDelay = pol.Backoff
	}
	delay := p.nextDelay
	p.nextDelay = min(2*p.nextDelay, pol.MaxBackoff)
	p.restarts++
	ev := RestartEvent{Restart: p.restarts, Termination: Termination(res), DelayMS: delay.Milliseconds()}
	if res.Signal == 0 && !res.TimedOut {
		code := res.Code
		ev.ExitCode = &code
	}
	p.eventCount++
	b, _ := json.Marshal(ev) // integers and strings: it cannot fail
	p.events = append(p.events, eventAt{n: p.eventCount, after: p.ring.nextSeq - 1, nanos: time.Now().UnixNano(), json: b})
	if len(p.events) > maxEvents {
		p.events = p.events[len(p.events)-maxEvents:]
	}
	p.waiting = true
	p.wakeLocked()
	return delay, true
}

// stop makes p start no more runs, and ends the wait of one between two
// runs. It reports whether p was waiting to restart. p.mu must be held.
func (p *Process) stopLocked() (waiting bool) {
	if !p.stopped {
		p.stopped = true
		close(p.stopc)
	}
	return p.waiting
}

// rerun starts p's command again, after the delay, unless p was stopped
// meanwhile. It reports whether the new run started; if it did not, the
// caller finishes p.
func (r *Registry) rerun(p *Process, delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stopc:
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	// Background processes belong to the registry, not to a request; see
	// start. The input was the first run's.
	c := p.cmd
	c.Input = ""
	ex, err := r.runner.StartTee(context.Background(), c, p.addLines, p.addRaw)
	if err != nil {
		r.opts.Log.Warn().Err(err).Str("id", p.ID).Msg("process could not restart")
		return false
	}
	p.exec, p.pid, p.sent, p.waiting, p.runStart = ex, ex.Pid(), 0, false, time.Now()
	return true
}

// current returns the executor process of p's current (or last) run.
func (p *Process) current() *executor.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exec
}
