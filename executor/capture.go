package executor

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// capture keeps the output of one stream within a byte budget: the first
// half of the budget as it came, and the last half in a ring, so that both
// how a command started and how it ended survive truncation.
//
// head and the ring share one array, with room for the marker line between
// them, so that bytes assembles the result in place: what Run returns holds
// a stream's output once, never a second copy.
type capture struct {
	max     int
	head    []byte // grows to max/2; then the start of the shared array
	tail    []byte // ring of max-max/2 bytes once head is full, after markerRoom
	tailPos int    // next write position in tail
	tailLen int
	dropped int64 // bytes that were written to tail and later overwritten
}

// markerRoom is the room for the marker line, which takes at most 73 bytes.
const markerRoom = 80

func (c *capture) write(b []byte) {
	if room := c.max/2 - len(c.head); room > 0 {
		n := min(room, len(b))
		c.growHead(n)
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	if len(b) == 0 {
		return
	}
	size := c.max - c.max/2
	if c.tail == nil {
		all := make([]byte, len(c.head)+markerRoom+size)
		copy(all, c.head)
		c.head = all[:len(c.head)]
		c.tail = all[len(c.head)+markerRoom:]
	}
	if len(b) > size {
		c.dropped += int64(len(b) - size)
		b = b[len(b)-size:]
	}
	for len(b) > 0 {
		n := copy(c.tail[c.tailPos:], b)
		b = b[n:]
		c.tailPos = (c.tailPos + n) % size
		if over := c.tailLen + n - size; over > 0 {
			c.dropped += int64(over)
			c.tailLen = size
		} else {
			c.tailLen += n
		}
	}
}

// growHead makes room for n more bytes in head, doubling as append would
// but never past max/2.
func (c *capture) growHead(n int) {
	if len(c.head)+n <= cap(c.head) {
		return
	}
	grown := make([]byte, len(c.head), min(max(2*cap(c.head), len(c.head)+n, 512), c.max/2))
	copy(grown, c.head)
	c.head = grown
}

// bytes returns what was kept. If anything was dropped, a marker line
// naming the number of bytes sits between the head and the tail. It
// rearranges the buffer in place, so it is called once, after the last
// write; the result aliases the buffer.
func (c *capture) bytes() []byte {
	if c.tail == nil {
		return c.head
	}
	if c.tailLen == len(c.tail) && c.tailPos > 0 {
		// Rotate the full ring so that it starts at its oldest byte.
		slices.Reverse(c.tail[:c.tailPos])
		slices.Reverse(c.tail[c.tailPos:])
		slices.Reverse(c.tail)
		c.tailPos = 0
	}
	out := c.head
	if c.dropped > 0 {
		out = fmt.Appendf(out, "\n[sandbox-executor: output truncated, %d bytes omitted]\n", c.dropped)
	}
	// The marker fits in markerRoom, so out still shares the array: the
	// tail moves down to follow it.
	n := copy(out[len(out):cap(out)], c.tail[:c.tailLen])
	return out[:len(out)+n]
}

// Output is what Runner.Run returns: the result and the captured output.
// Its Truncated is also true if either stream was longer than
// Runner.MaxOutput and its middle was replaced by a marker line.
type Output struct {
	Result
	Stdout []byte
	Stderr []byte
	// Omitted is how many bytes of the two streams together were dropped
	// from their middles for the cap (see RunCapped).
	Omitted int64
}

// captureSet holds the two captures of one Run; mu guards both, since the
// two pipe readers write at the same time.
type captureSet struct {
	mu             sync.Mutex
	stdout, stderr capture
}

func (cs *captureSet) consumer(s Stream) func([]byte, time.Time, bool) int {
	return func(b []byte, _ time.Time, _ bool) int {
		cs.mu.Lock()
		if s == Stdout {
			cs.stdout.write(b)
		} else {
			cs.stderr.write(b)
		}
		cs.mu.Unlock()
		return len(b)
	}
}

// Clip keeps b within max bytes as Run keeps a stream within its cap: the
// first half of max and the last half, with the marker line naming the
// omitted bytes between them. It returns b itself when it fits, and how
// many bytes it omitted.
func Clip(b []byte, max int) ([]byte, int64) {
	if len(b) <= max {
		return b, 0
	}
	c := capture{max: max}
	c.write(b)
	return c.bytes(), c.dropped
}
