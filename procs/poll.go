package procs

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// ErrCursor is returned by ReadOutput for a cursor past the output.
var ErrCursor = errors.New("cursor is past the output")

// Output is what ReadOutput returns: the output since a cursor, and the
// state of the process once it was read.
type Output struct {
	Stdout, Stderr []byte
	// Merged is stdout and stderr together, in the order they were read,
	// from ReadMerged (which leaves Stdout and Stderr nil).
	Merged []byte
	// Missed is how many bytes after the cursor the ring dropped before
	// they could be read, or that were written before the process was
	// first polled.
	Missed int64
	// Cursor is the offset after the last byte returned: the cursor of
	// the next read.
	Cursor int64
	Info   Info
	// Result is how the process ended, once Info says it has.
	Result executor.Result
	// Termination says why the process ended; nil while it runs.
	Termination *executor.Termination

	// Middle, when ReadOutput was given a budget that leaves bytes out,
	// names the log lines that hold them, if the log still does.
	Middle *Lines

	from int64 // the offset of the first byte returned
}

// Lines names a range of lines of the process's log: the first line and
// the last, for process_logs_streaming.
type Lines struct {
	First, Last uint64
}

// middleLocked returns the range of p's log lines that holds the bytes
// of o that a budget of budget bytes per stream leaves out: those after
// the first budget/2 and before the last budget-budget/2 of each stream,
// as executor.Clip keeps them. It returns nil if nothing is left out, or
// if the log no longer holds all of it. p.mu must be held, since o was
// read.
func (p *Process) middleLocked(o Output, budget int) *Lines {
	outHead, errHead := budget/2, budget/2
	outTail, errTail := budget-budget/2, budget-budget/2
	var l Lines
	found := false
	for _, part := range []struct {
		s          executor.Stream
		n          int
		head, tail int
	}{{executor.Stdout, len(o.Stdout), outHead, outTail}, {executor.Stderr, len(o.Stderr), errHead, errTail}} {
		if part.head+part.tail >= part.n {
			continue
		}
		from := p.out.offsetOf(o.from, part.s, part.head)
		to := p.out.offsetOf(o.from, part.s, part.n-part.tail-1) + 1
		first, last, ok := p.out.lines(from, to, p.ring.nextSeq)
		if !ok || first < p.ring.oldest() || first > last {
			return nil
		}
		if !found || first < l.First {
			l.First = first
		}
		l.Last = max(l.Last, last)
		found = true
	}
	if !found {
		return nil
	}
	return &l
}

// addRaw is p's executor.RawFunc: the output as it was read, for
// ReadOutput.
func (p *Process) addRaw(s executor.Stream, _ time.Time, b []byte) {
	p.mu.Lock()
	p.out.write(s, b, p.ring.nextSeq)
	p.mu.Unlock()
}

// Keep makes p keep its raw output, its latest max bytes, from now on if
// it did not already (see Registry.StartWith's Polled): a poll calls it
// before it writes its input, so that what the input brings is kept.
func (p *Process) Keep(max int) {
	p.mu.Lock()
	p.out.keep(max)
	p.mu.Unlock()
}

// ReadOutput returns p's output from offset cursor on (an offset into
// stdout and stderr together, in the order they were read) or, if cursor
// is nil, from where the last ReadOutput ended; and makes p keep its
// output from now on if it did not (see Registry.StartPolled). The output
// and the state come from one moment: once Info says the process ended,
// the output returned is all there is. A cursor past the output, or
// negative, returns an error wrapping ErrCursor. A budget, if positive,
// is the max_output_bytes the caller will keep of each stream: see
// Output.Middle.
func (p *Process) ReadOutput(cursor *int64, keep, budget int) (Output, error) {
	return p.readOutput(cursor, keep, budget, false)
}

// ReadMerged is ReadOutput with the output in Output.Merged, stdout and
// stderr together as they were read, for a reader (an MCP tool) that
// shows one stream.
func (p *Process) ReadMerged(cursor *int64, keep int) (Output, error) {
	return p.readOutput(cursor, keep, 0, true)
}

func (p *Process) readOutput(cursor *int64, keep, budget int, merged bool) (Output, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.keep(keep)
	from := p.cursor
	if cursor != nil {
		from = *cursor
	}
	if from < 0 || from > p.out.end {
		return Output{}, fmt.Errorf("%w: cursor %d, output so far %d bytes", ErrCursor, from, p.out.end)
	}
	var o Output
	o.from = from
	if merged {
		o.Merged, o.Missed, o.Cursor = p.out.readMerged(from)
	} else {
		o.Stdout, o.Stderr, o.Missed, o.Cursor = p.out.read(from)
	}
	o.from += o.Missed
	if budget > 0 {
		o.Middle = p.middleLocked(o, budget)
	}
	p.cursor = o.Cursor
	o.Info = p.infoLocked()
	if p.status != StatusRunning {
		o.Result = *p.lastRes
	}
	o.Termination = p.terminationLocked()
	return o, nil
}

// Termination returns why p ended, or nil while it runs.
func (p *Process) Termination() *executor.Termination {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.terminationLocked()
}

func (p *Process) terminationLocked() *executor.Termination {
	if p.status == StatusRunning {
		return nil
	}
	return p.lastTerminationLocked()
}

// LastTermination returns why p's last run ended, nil before one has: a
// process that restarts is running with the termination of its last run.
func (p *Process) LastTermination() *executor.Termination {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastTerminationLocked()
}

// lastTerminationLocked is the one termination computation for a
// process (executor.Result.Termination: limits first, then timeout,
// client gone, exit, signal, killed), with the signals sent through Kill
// to its current run and whether its client left. A process that Kill
// stopped while it waited to restart was killed, whatever its last run
// said.
func (p *Process) lastTerminationLocked() *executor.Termination {
	if p.lastRes == nil {
		return nil
	}
	if p.killedWait {
		if t, ok := executor.LimitTermination(*p.lastRes); ok {
			return &t
		}
		return &executor.Termination{Reason: executor.ReasonKilled}
	}
	sent := func(sig syscall.Signal) bool { return sig >= 1 && sig <= 64 && p.sent&(1<<(sig-1)) != 0 }
	if p.status == StatusRunning {
		sent = nil // the signals sent are to the current run, not to the last
	}
	t := p.lastRes.Termination(sent, p.clientGone)
	return &t
}

// Abandon kills p's process group for a request that owned it and left
// before it was handed over: its later readers see client_gone.
func (p *Process) Abandon() {
	p.mu.Lock()
	if p.status == StatusRunning {
		p.clientGone = true
	}
	p.mu.Unlock()
	_, _ = p.signal(syscall.SIGKILL) // ErrNotRunning once it ended by itself
}
