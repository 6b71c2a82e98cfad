package procs

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// budget bounds the retained lines of all processes of a Registry together,
// running and finished. A process adds what each batch of lines costs; the
// batch that takes the total over max makes its producer trim every ring
// down to one level, chosen so that the total falls to low: the processes
// that hold the most lose their oldest lines first, and those that hold
// less than the level lose nothing.
//
// Trimming to low rather than to max is the hysteresis that keeps the hot
// path cheap: a producer pays one atomic add per batch, and the trim, which
// visits every process, runs once per max-low bytes of output.
type budget struct {
	max int64 // the bound
	low int64 // where a trim brings the total

	// total is the sum of every member's footprint, each member adding its
	// changes after it has made them (see Process.held). It may run ahead
	// of a trim by the batches being added meanwhile, each of whose
	// producers then trims in turn.
	total atomic.Int64

	// mu guards members and sizes, and makes trims one at a time. It is
	// taken without any Process's mu held; a trim takes one member's mu at
	// a time under it.
	mu      sync.Mutex
	members map[*Process]struct{}
	sizes   []memberSize // reused by trim

	// freed counts the bytes released (not trimmed) since memory was last
	// returned to the system; past reclaimAt, kick wakes reclaim.
	freed     atomic.Int64
	reclaimAt int64
	interval  time.Duration // the least time between two returns
	kick      chan struct{} // capacity 1
	free      func()        // returns memory to the system; debug.FreeOSMemory
}

type memberSize struct {
	p     *Process
	bytes int64
}

// newBudget returns a budget of max bytes that calls free, at most once per
// interval, after a quarter of max has been released.
func newBudget(max int64, interval time.Duration, free func()) *budget {
	return &budget{
		max:       max,
		low:       max - max/16,
		members:   map[*Process]struct{}{},
		reclaimAt: max / 4,
		interval:  interval,
		kick:      make(chan struct{}, 1),
		free:      free,
	}
}

// join makes p a member, so that trims can reach it. p must hold no lines
// yet.
func (b *budget) join(p *Process) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members[p] = struct{}{}
}

// leave removes p, whose lines must have been released.
func (b *budget) leave(p *Process) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.members, p)
}

// add records that a member's footprint grew or shrank by delta, and trims
// if the total is now over max. It must be called without any Process's mu
// held.
func (b *budget) add(delta int64) {
	if b.total.Add(delta) > b.max && delta > 0 {
		b.trim()
	}
}

// release records that a member's lines were released, freeing -delta
// bytes, and wakes reclaim once enough has been released.
func (b *budget) release(delta int64) {
	b.total.Add(delta)
	if b.freed.Add(-delta) >= b.reclaimAt {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// trim brings the total down to low by trimming every member that holds
// more than one level to that level, the level being the highest that
// gets there.
func (b *budget) trim() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total.Load() <= b.max {
		return // a trim that ran while this one waited did the work
	}
	b.sizes = b.sizes[:0]
	for p := range b.members {
		b.sizes = append(b.sizes, memberSize{p, p.held.Load()})
	}
	level := waterLevel(b.sizes, b.low)
	for _, m := range b.sizes { // sorted by waterLevel, smallest first
		if m.bytes > level {
			b.total.Add(m.p.trimTo(level))
		}
	}
	clear(b.sizes) // let processes that leave be collected
}

// waterLevel sorts sizes by bytes, smallest first, and returns the highest
// level such that the sizes, each cut to the level, sum to at most target.
// If they already do uncut, it returns the largest size.
func waterLevel(sizes []memberSize, target int64) int64 {
	slices.SortFunc(sizes, func(a, b memberSize) int { return cmp.Compare(a.bytes, b.bytes) })
	left := target
	for i, m := range sizes {
		rest := int64(len(sizes) - i) // this one and the larger ones
		if m.bytes*rest > left {
			return max(left/rest, 0)
		}
		left -= m.bytes
	}
	if len(sizes) == 0 {
		return 0
	}
	return sizes[len(sizes)-1].bytes
}

// reclaim returns memory to the system after large releases, at most once
// per interval: without it the Go runtime returns freed memory only
// gradually, and an agent that once held its whole budget would keep
// looking that big. Trims do not count: the lines they evict make room
// for new ones. It ends when quit is closed.
func (b *budget) reclaim(quit <-chan struct{}) {
	var last time.Time
	for {
		select {
		case <-b.kick:
		case <-quit:
			return
		}
		if wait := b.interval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-quit:
				t.Stop()
				return
			}
		}
		b.freed.Store(0)
		b.free()
		last = time.Now()
	}
}
