package procs

import (
	"context"
	"io"
	"math"
)

// Subscription reads a process's lines from a given Seq on: first the
// retained ones, then live ones as they arrive. It never holds up the
// process: a subscriber that falls behind the ring skips what was evicted
// and is told how many lines that was.
type Subscription struct {
	p      *Process
	next   uint64        // Seq of the next line to return
	nextEv uint64        // number of the next restart event to return
	wake   chan struct{} // capacity 1; see Process.wakeLocked
}

// Subscribe returns a Subscription that starts after line Seq after; 0
// means from the oldest line retained. The caller must Close it.
func (p *Process) Subscribe(after uint64) *Subscription {
	// The largest Seq saturates rather than wrapping to 0, which would
	// replay every line: no process prints that many, so such a reader
	// is at the end.
	next := after + 1
	if after == math.MaxUint64 {
		next = after
	}
	s := &Subscription{p: p, next: next, wake: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	// The restart events that come after line after are replayed (one
	// right after it, too: events have no number a reader could resume
	// from).
	s.nextEv = p.eventCount + 1
	for _, e := range p.events {
		if e.after >= after {
			s.nextEv = e.n
			break
		}
	}
	p.subs[s] = struct{}{}
	return s
}

// Close removes s from its process at once. It is safe to call twice.
func (s *Subscription) Close() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.subs, s)
}

// Read appends to dst, without waiting, up to cap(dst)-len(dst) lines (at
// least one) that follow the last line s returned. It also returns how many
// lines were evicted before s could read them, and whether the process has
// ended and every line it printed has been returned or evicted.
func (s *Subscription) Read(dst []Line) (lines []Line, missed uint64, ended bool) {
	limit, start := max(cap(dst)-len(dst), 1), len(dst)
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if oldest := s.p.ring.oldest(); s.next < oldest {
		missed, s.next = oldest-s.next, oldest
	}
	if len(s.p.events) > 0 && s.nextEv < s.p.events[0].n {
		s.nextEv = s.p.events[0].n // older ones were let go
	}
	for room := limit; room > 0; room = limit - len(dst) + start {
		if e := s.p.eventLocked(s.nextEv); e != nil && e.after < s.next {
			dst = append(dst, Line{Nanos: e.nanos, Data: e.json})
			s.nextEv++
			continue
		}
		n := room
		if e := s.p.eventLocked(s.nextEv); e != nil {
			n = min(n, int(e.after-s.next+1)) // the lines up to the event
		}
		before := len(dst)
		dst = s.p.ring.appendFrom(dst, s.next, n)
		if len(dst) == before {
			break
		}
		s.next += uint64(len(dst) - before)
	}
	// >=, not ==: a reader may resume after a Seq the process never reached.
	return dst, missed, s.p.status != StatusRunning && s.next >= s.p.ring.nextSeq && s.nextEv > s.p.eventCount
}

// eventLocked returns restart event number n, or nil if it is not (or no
// longer) kept. p.mu must be held.
func (p *Process) eventLocked(n uint64) *eventAt {
	if len(p.events) == 0 || n > p.eventCount || n < p.events[0].n {
		return nil
	}
	return &p.events[n-p.events[0].n]
}

// Wake returns a channel that receives after new lines arrive, the process
// ends, or its lines are released. A Read after each receive sees the
// change. Callers that wait on it must Read before each wait, not after.
func (s *Subscription) Wake() <-chan struct{} { return s.wake }

// Next is Read that waits. It returns at least one line or a missed count;
// io.EOF once the process has ended and every line has been returned, or,
// when follow is false, once every line retained now has been returned;
// and ctx.Err() if ctx ends first.
func (s *Subscription) Next(ctx context.Context, dst []Line, follow bool) ([]Line, uint64, error) {
	n := len(dst)
	for {
		lines, missed, ended := s.Read(dst)
		if len(lines) > n || missed > 0 {
			return lines, missed, nil
		}
		if ended || !follow {
			return lines, 0, io.EOF
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return lines, 0, ctx.Err()
		}
	}
}

// Subscribers returns how many subscriptions are open on p.
func (p *Process) Subscribers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.subs)
}
