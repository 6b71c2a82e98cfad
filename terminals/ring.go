package terminals

// minRingAlloc is the smallest buffer a ring allocates: one read from a
// terminal (the line discipline hands over at most 4 KiB at a time).
const minRingAlloc = 4 << 10

// ring keeps the last max bytes written to it, addressed by offset: the
// n-th byte ever written (from 0) has offset n, whether it is still held
// or not. Its buffer grows as bytes arrive, doubling up to max, so that a
// quiet terminal costs little. The zero ring is not usable; see newRing.
type ring struct {
	buf []byte // circular: offset o is at buf[o % len(buf)]
	end uint64 // offset of the next byte written: how many were ever written
	n   int    // bytes held: those at offsets end-n up to end
	max int
}

func newRing(max int) ring { return ring{max: max} }

// oldest returns the offset of the oldest byte held; if none is held, end.
func (r *ring) oldest() uint64 { return r.end - uint64(r.n) }

// write appends p, evicting the oldest bytes beyond max.
func (r *ring) write(p []byte) {
	if len(p) >= r.max {
		// Everything held, and the start of p, is evicted at once.
		r.end += uint64(len(p) - r.max)
		p = p[len(p)-r.max:]
		r.n = 0
	}
	if need := r.n + len(p); need > len(r.buf) && len(r.buf) < r.max {
		r.grow(min(r.max, max(need, 2*len(r.buf), minRingAlloc)))
	}
	r.put(r.end, p)
	r.end += uint64(len(p))
	r.n = min(r.n+len(p), len(r.buf))
}

// grow moves the bytes held into a buffer of size bytes, at least r.n.
func (r *ring) grow(size int) {
	old, from := r.buf, r.oldest()
	r.buf = make([]byte, size)
	if r.n == 0 {
		return
	}
	// The bytes held, in at most two pieces of the old buffer.
	i := int(from % uint64(len(old)))
	first := old[i:min(i+r.n, len(old))]
	r.put(from, first)
	r.put(from+uint64(len(first)), old[:r.n-len(first)])
}

// put copies p to offset o's place in the buffer, wrapping around its
// end. len(p) is at most len(r.buf).
func (r *ring) put(o uint64, p []byte) {
	if len(p) == 0 {
		return
	}
	i := int(o % uint64(len(r.buf)))
	k := copy(r.buf[i:], p)
	copy(r.buf, p[k:])
}

// readAt copies into dst the bytes from offset o on, as many as fit and
// are held, and returns how many it copied. o must not be older than
// oldest().
func (r *ring) readAt(dst []byte, o uint64) int {
	if o >= r.end || len(dst) == 0 {
		return 0
	}
	n := int(min(uint64(len(dst)), r.end-o))
	i := int(o % uint64(len(r.buf)))
	k := copy(dst[:n], r.buf[i:])
	copy(dst[k:n], r.buf)
	return n
}

// release drops every byte held and the buffer, but keeps counting
// offsets, so that readers learn how many bytes they missed.
func (r *ring) release() {
	r.buf, r.n = nil, 0
}

// footprint is the memory the ring holds, in bytes.
func (r *ring) footprint() int { return len(r.buf) }
