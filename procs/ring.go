package procs

import (
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Line is one line of a process's output.
type Line struct {
	// Seq numbers the lines of one process from 1, in the order they were
	// read, stdout and stderr together. It is the SSE event id.
	Seq    uint64
	Nanos  int64 // when the line was read, in Unix nanoseconds
	Stream executor.Stream
	// first is set on the first line of each batch stored at once: the
	// lines of a batch share one allocation, which its first line's Data
	// starts. See ring.compactHead.
	first bool
	// Data is the line without its line ending. It is never modified once
	// stored, so a Line copied out of the ring may be read without a lock.
	Data []byte
}

// IsEvent reports whether l is no line but a restart event between two
// runs, as a Subscription returns them: its Seq is 0 (it takes no line
// number) and its Data is the RestartEvent in JSON.
func (l Line) IsEvent() bool { return l.Seq == 0 }

// Time returns when the line was read.
func (l Line) Time() time.Time { return time.Unix(0, l.Nanos) }

// lineOverhead is what a stored line costs beyond its data: the Line
// itself in the ring. Counting it bounds the memory of many short lines.
const lineOverhead = 48

// chunkLines is how many lines a ring allocates room for at a time. A ring
// grows and shrinks a chunk at a time, so it never copies its lines to do
// either, and holds at most two chunks of empty slots: the part of its
// newest chunk not yet written, and one spare.
const chunkLines = 64

// ring keeps the most recent lines of one process within a line count and
// a byte count. Seqs are consecutive, so a line is found by arithmetic.
// The zero ring is not usable; see newRing.
type ring struct {
	chunks   [][]Line // each chunkLines long; the oldest line is chunks[0][head]
	spare    []Line   // an emptied chunk kept for the next one needed, or nil
	head     int      // index in chunks[0] of the oldest line
	n        int      // lines held
	bytes    int      // data plus lineOverhead for each line held
	nextSeq  uint64   // Seq of the next line pushed
	maxLines int
	maxBytes int
}

func newRing(maxLines, maxBytes int) ring {
	return ring{nextSeq: 1, maxLines: maxLines, maxBytes: maxBytes}
}

// at returns the slot of the i-th line held, from the oldest.
func (r *ring) at(i int) *Line {
	i += r.head
	return &r.chunks[i/chunkLines][i%chunkLines]
}

// push stores l, giving it the next Seq, and evicts the oldest lines while
// either bound is exceeded. A line larger than maxBytes on its own is still
// stored, alone.
func (r *ring) push(l Line) {
	l.Seq = r.nextSeq
	r.nextSeq++
	size := len(l.Data) + lineOverhead
	for r.n > 0 && (r.n == r.maxLines || r.bytes+size > r.maxBytes) {
		r.evict()
	}
	if r.head+r.n == len(r.chunks)*chunkLines {
		c := r.spare
		if c == nil {
			c = make([]Line, chunkLines)
		}
		r.chunks, r.spare = append(r.chunks, c), nil
	}
	*r.at(r.n) = l
	r.n++
	r.bytes += size
}

// evict drops the oldest line. Once the oldest chunk is empty, it becomes
// the spare, or is let go if there already is one.
func (r *ring) evict() {
	old := r.at(0)
	r.bytes -= len(old.Data) + lineOverhead
	*old = Line{} // let the data be collected
	r.head++
	r.n--
	if r.head == chunkLines {
		if r.spare == nil {
			r.spare = r.chunks[0]
		}
		r.chunks[0] = nil // the array behind chunks must not keep it
		r.chunks, r.head = r.chunks[1:], 0
	}
}

// footprint is what r costs against the budget shared by all rings: its
// bytes, plus lineOverhead for each empty slot it has allocated.
func (r *ring) footprint() int {
	slots := len(r.chunks)*chunkLines - r.n
	if r.spare != nil {
		slots += chunkLines
	}
	return r.bytes + lineOverhead*slots
}

// trimTo evicts the oldest lines until r's footprint is at most limit,
// letting go of empty chunks, and compacts the head.
func (r *ring) trimTo(limit int) {
	for r.footprint() > limit {
		switch {
		case r.spare != nil:
			r.spare = nil
		case r.n == 0:
			r.chunks, r.head = nil, 0
		default:
			r.evict() // which may keep the chunk it empties as the spare
		}
	}
	r.compactHead()
}

// shrink lets go of the spare chunk, for a ring that will grow no more.
func (r *ring) shrink() { r.spare = nil }

// compactHead copies the oldest lines into an allocation of their own if
// earlier lines of their batch were evicted. Without it, the batch's whole
// allocation (up to one pipe read, 96 KiB) would stay alive for them while
// the budget counts only what they hold. push, on the hot path, does not
// compact: what it evicts for the per-process bounds leaves at most one
// batch per ring partly alive.
func (r *ring) compactHead() {
	if r.n == 0 || r.at(0).first {
		return
	}
	k, size := 0, 0
	for ; k < r.n; k++ {
		l := r.at(k)
		if l.first {
			break
		}
		size += len(l.Data)
	}
	arena := make([]byte, 0, size)
	for i := 0; i < k; i++ {
		l := r.at(i)
		start := len(arena)
		arena = append(arena, l.Data...)
		l.Data = arena[start:len(arena):len(arena)]
	}
	r.at(0).first = true
}

// oldest returns the Seq of the oldest line held; if none is held, the Seq
// the next line will get.
func (r *ring) oldest() uint64 { return r.nextSeq - uint64(r.n) }

// appendFrom appends to dst the lines from Seq seq on, at most limit of
// them, and returns dst. seq must not be older than oldest().
func (r *ring) appendFrom(dst []Line, seq uint64, limit int) []Line {
	oldest := r.oldest()
	for ; seq < r.nextSeq && limit > 0; seq, limit = seq+1, limit-1 {
		dst = append(dst, *r.at(int(seq - oldest)))
	}
	return dst
}

// reset drops every line held but keeps counting Seqs, so readers learn how
// many lines they missed.
func (r *ring) reset() {
	r.chunks, r.spare, r.head, r.n, r.bytes = nil, nil, 0, 0, 0
}
