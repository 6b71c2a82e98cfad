package procs

import (
	"bytes"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// outRing keeps the last bytes a process wrote, stdout and stderr together
// in the order they were read, addressed by offset: the offset of a byte
// is how many bytes the process wrote before it, so a reader that keeps
// the offset it reached (a cursor) gets every later byte once, and learns
// how many it missed if the ring dropped them first. It is rule 17's ring,
// with each run of one stream remembered so the two can be told apart.
//
// The zero outRing keeps nothing but counts (see count); keep starts
// keeping.
type outRing struct {
	max  int    // bytes kept once keeping; 0 means not keeping
	buf  []byte // allocated at the first write once keeping, max long; offset o is at buf[o%max]
	end  int64  // offset after the newest byte: every byte ever written
	from int64  // offset of the first byte kept: end when keep was called
	runs []run  // the runs of the bytes held, oldest first
	// marks tie offsets to line numbers, for Middle: each is where a
	// read began and the Seq the process's next line had then. At most
	// maxMarks are kept; past it every other one goes, so they thin out
	// evenly rather than forget the oldest.
	marks []mark
}

// mark says that the lines holding bytes from off on have a Seq of at
// least seq.
type mark struct {
	off int64
	seq uint64
}

// maxMarks bounds the marks of one ring.
const maxMarks = 1024

// run is a stretch of bytes of one stream, from offset start to the start
// of the next run (or the end).
type run struct {
	start  int64
	stream executor.Stream
}

// keep makes r keep the last max bytes from now on. Bytes written before
// are missed by readers, but counted.
func (r *outRing) keep(max int) {
	if r.max == 0 {
		r.max, r.from = max, r.end
	}
}

// start returns the offset of the oldest byte held.
func (r *outRing) start() int64 {
	if r.max == 0 {
		return r.end
	}
	return max(r.end-int64(r.max), r.from)
}

// write appends b, of stream s, evicting the oldest bytes past max.
// nextSeq is the Seq of the next line the process will store.
func (r *outRing) write(s executor.Stream, b []byte, nextSeq uint64) {
	if r.max == 0 {
		r.end += int64(len(b))
		return
	}
	r.addMark(mark{off: r.end, seq: nextSeq})
	if r.buf == nil {
		r.buf = make([]byte, r.max)
	}
	if over := len(b) - r.max; over > 0 {
		r.end += int64(over) // written and evicted at once
		b = b[over:]
	}
	if n := len(r.runs); n == 0 || r.runs[n-1].stream != s {
		r.runs = append(r.runs, run{start: r.end, stream: s})
	}
	for len(b) > 0 {
		i := int(r.end % int64(r.max))
		n := copy(r.buf[i:], b)
		b = b[n:]
		r.end += int64(n)
	}
	r.trimRuns()
}

// addMark records m, thinning the marks out once there are maxMarks.
func (r *outRing) addMark(m mark) {
	if len(r.marks) == maxMarks {
		k := 0
		for i := 0; i < len(r.marks); i += 2 {
			r.marks[k] = r.marks[i]
			k++
		}
		r.marks = r.marks[:k]
	}
	r.marks = append(r.marks, m)
}

// lines returns a range of line Seqs that holds every byte from offset
// from to offset to (exclusive): the Seq of the last mark at or before
// from, and one less than the Seq of the first mark at or after to (or
// nextSeq-1 if there is none). ok is false if no mark is at or before
// from.
func (r *outRing) lines(from, to int64, nextSeq uint64) (first, last uint64, ok bool) {
	last = nextSeq - 1
	var at mark // the last mark at or before from
	for _, m := range r.marks {
		if m.off <= from {
			at, ok = m, true
		}
		if m.off >= to && m.seq > 0 {
			// The line that holds the byte before to may end later, in
			// the tail: it is the first line of the mark's read, at most.
			last = m.seq
			break
		}
	}
	if !ok {
		return 0, 0, false
	}
	// The bytes from the mark to from are of one read, of one stream: the
	// lines they end come before from's. Counting them gives a lower
	// bound still (a line cut in pieces, or the other stream's lines
	// stored between, only make from's Seq larger).
	first = at.seq
	if at.off >= r.start() {
		first += uint64(bytes.Count(r.copyOut(at.off, from), []byte{'\n'}))
	}
	return first, min(last, nextSeq-1), true
}

// offsetOf returns the offset of the i-th byte of stream s from offset
// from on.
func (r *outRing) offsetOf(from int64, s executor.Stream, i int) int64 {
	for k, rn := range r.runs {
		end := r.end
		if k+1 < len(r.runs) {
			end = r.runs[k+1].start
		}
		if end <= from || rn.stream != s {
			continue
		}
		start := max(from, rn.start)
		if n := end - start; int64(i) < n {
			return start + int64(i)
		} else {
			i -= int(n)
		}
	}
	return r.end
}

// trimRuns drops the runs that hold no byte still held, and the marks
// before the last one at or before the oldest byte held.
func (r *outRing) trimRuns() {
	start := r.start()
	m := 0
	for m+1 < len(r.marks) && r.marks[m+1].off <= start {
		m++
	}
	if m > 0 {
		r.marks = append(r.marks[:0], r.marks[m:]...)
	}
	k := 0
	for k+1 < len(r.runs) && r.runs[k+1].start <= start {
		k++
	}
	if k > 0 {
		r.runs = append(r.runs[:0], r.runs[k:]...)
	}
}

// read returns the bytes from offset from on, split by stream, how many
// bytes from there on were dropped before they could be read, and the
// offset after the last byte returned. An offset past the end reads
// nothing.
func (r *outRing) read(from int64) (stdout, stderr []byte, missed, next int64) {
	if start := r.start(); from < start {
		missed, from = start-from, start
	}
	if from >= r.end {
		return nil, nil, missed, max(from, r.end)
	}
	for i, rn := range r.runs {
		end := r.end
		if i+1 < len(r.runs) {
			end = r.runs[i+1].start
		}
		if end <= from {
			continue
		}
		b := r.copyOut(max(from, rn.start), end)
		if rn.stream == executor.Stderr {
			stderr = append(stderr, b...)
		} else {
			stdout = append(stdout, b...)
		}
	}
	return stdout, stderr, missed, r.end
}

// readMerged is read with both streams together, in the order they were
// read.
func (r *outRing) readMerged(from int64) (out []byte, missed, next int64) {
	if start := r.start(); from < start {
		missed, from = start-from, start
	}
	if from >= r.end {
		return nil, missed, max(from, r.end)
	}
	return r.copyOut(from, r.end), missed, r.end
}

// copyOut returns a copy of the bytes from offset from to offset to, both
// held.
func (r *outRing) copyOut(from, to int64) []byte {
	out := make([]byte, 0, to-from)
	for from < to {
		i := int(from % int64(r.max))
		n := min(int(to-from), r.max-i)
		out = append(out, r.buf[i:i+n]...)
		from += int64(n)
	}
	return out
}

// release lets go of the bytes held; offsets go on counting.
func (r *outRing) release() {
	r.buf, r.runs, r.marks, r.max = nil, nil, nil, 0
}
