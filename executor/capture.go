package executor

import (
	"fmt"
	"sync"
	"time"
)

// capture keeps the output of one stream within a byte budget: the first
// half of the budget as it came, and the last half in a ring, so that both
// how a command started and how it ended survive truncation.
type capture struct {
	max     int
	head    []byte
	tail    []byte // ring of max-max/2 bytes once head is full
	tailPos int    // next write position in tail
	tailLen int
	dropped int64 // bytes that were written to tail and later overwritten
}

func (c *capture) write(b []byte) {
	if room := c.max/2 - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	if len(b) == 0 {
		return
	}
	size := c.max - c.max/2
	if c.tail == nil {
		c.tail = make([]byte, size)
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

// bytes returns what was kept. If anything was dropped, a marker line
// naming the number of bytes sits between the head and the tail.
func (c *capture) bytes() []byte {
	out := make([]byte, 0, len(c.head)+c.tailLen+80)
	out = append(out, c.head...)
	if c.dropped > 0 {
		out = fmt.Appendf(out, "\n[sandbox-executor: output truncated, %d bytes omitted]\n", c.dropped)
	}
	if c.tailLen < len(c.tail) {
		return append(out, c.tail[:c.tailLen]...)
	}
	out = append(out, c.tail[c.tailPos:]...)
	return append(out, c.tail[:c.tailPos]...)
}

// Output is what Runner.Run returns: the result and the captured output.
type Output struct {
	Result
	Stdout []byte
	Stderr []byte
	// Truncated is true if either stream was longer than Runner.MaxOutput
	// and its middle was replaced by a marker line.
	Truncated bool
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
