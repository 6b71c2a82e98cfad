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
	// Data is the line without its line ending. It is never modified once
	// stored, so a Line copied out of the ring may be read without a lock.
	Data []byte
}

// Time returns when the line was read.
func (l Line) Time() time.Time { return time.Unix(0, l.Nanos) }

// lineOverhead is what a stored line costs beyond its data: the Line
// itself in the ring. Counting it bounds the memory of many short lines.
const lineOverhead = 48

// ring keeps the most recent lines of one process within a line count and
// a byte count. Seqs are consecutive, so a line is found by arithmetic.
// The zero ring is not usable; see newRing.
type ring struct {
	buf      []Line // circular; grows up to maxLines
	head     int    // index of the oldest line
	n        int    // lines held
	bytes    int    // data plus lineOverhead for each line held
	nextSeq  uint64 // Seq of the next line pushed
	maxLines int
	maxBytes int
}

func newRing(maxLines, maxBytes int) ring {
	return ring{nextSeq: 1, maxLines: maxLines, maxBytes: maxBytes}
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
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = l
	r.n++
	r.bytes += size
}

func (r *ring) evict() {
	old := &r.buf[r.head]
	r.bytes -= len(old.Data) + lineOverhead
	*old = Line{} // let the data be collected
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// grow doubles the buffer, up to maxLines, so a process that prints little
// does not pay for a full ring.
func (r *ring) grow() {
	size := min(max(2*len(r.buf), 64), r.maxLines)
	buf := make([]Line, size)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// oldest returns the Seq of the oldest line held; if none is held, the Seq
// the next line will get.
func (r *ring) oldest() uint64 { return r.nextSeq - uint64(r.n) }

// appendFrom appends to dst the lines from Seq seq on, at most limit of
// them, and returns dst. seq must not be older than oldest().
func (r *ring) appendFrom(dst []Line, seq uint64, limit int) []Line {
	oldest := r.oldest()
	for ; seq < r.nextSeq && limit > 0; seq, limit = seq+1, limit-1 {
		dst = append(dst, r.buf[(r.head+int(seq-oldest))%len(r.buf)])
	}
	return dst
}

// reset drops every line held but keeps counting Seqs, so readers learn how
// many lines they missed.
func (r *ring) reset() {
	r.buf, r.head, r.n, r.bytes = nil, 0, 0, 0
}
