package terminals

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A cursor resumes at any offset kept: concatenating what it reads before
// and after is the stream once, with no byte lost or repeated.
func TestResume(t *testing.T) {
	r := newTestRegistry(t, Options{})
	term := start(t, r, Spec{Cmd: "seq 1 20000"})
	rd := attach(t, term, 0)
	rd.until(func(out string) bool { return len(out) > 10000 })
	cut := rd.c.Offset()
	first := string(rd.out)
	rd.c.Close()

	rest := attach(t, term, cut).toEnd(t)
	assert.Equal(t, seqOutput(20000), first+rest)
	assert.Equal(t, seqOutput(20000), attach(t, term, FromOldest).toEnd(t), "everything is still kept")
	_, err := term.Attach(uint64(len(first+rest)) + 1)
	assert.ErrorIs(t, err, ErrOffset)
}

// seqOutput is what seq 1 n prints on a terminal, which turns "\n" into
// "\r\n".
func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	return b.String()
}

// A cursor that never reads holds up neither the terminal nor another
// cursor; when it reads at last it is told how many bytes it missed, then
// gets the rest.
func TestStalledCursor(t *testing.T) {
	r := newTestRegistry(t, Options{RingBytes: 8 << 10})
	term := start(t, r, Spec{Cmd: "read x; seq 1 100000"})
	stalled := attach(t, term, 0)
	live := attach(t, term, 0)
	typeIn(t, term, "\n")
	waitDone(t, term) // the terminal ran to its end though one cursor never read
	live.toEnd(t)
	assert.True(t, strings.HasSuffix(string(live.out), "99999\r\n100000\r\n"))

	out := stalled.toEnd(t)
	want := seqOutput(100000)
	assert.Equal(t, uint64(len(want)+2-len(out)), stalled.missed, "missed counts every byte not returned (the echoed newline included)")
	assert.True(t, strings.HasSuffix(want, out), "after the gap, the end of the stream, intact")
	assert.LessOrEqual(t, len(out), 8<<10)
}

// A cursor attached at an offset the ring has evicted stays there until
// it reads: its first Read reports the bytes missed from there on, then
// returns the rest, and the two add up to the end of the stream.
func TestAttachEvicted(t *testing.T) {
	r := newTestRegistry(t, Options{RingBytes: 8 << 10})
	term := start(t, r, Spec{Cmd: "seq 1 10000"})
	waitDone(t, term)
	want := seqOutput(10000)
	rd := attach(t, term, 100)
	assert.Equal(t, uint64(100), rd.c.Offset())
	out := rd.toEnd(t)
	assert.Equal(t, uint64(len(want)-100-(8<<10)), rd.missed)
	assert.Equal(t, want[len(want)-8<<10:], out)
	assert.Equal(t, uint64(len(want)), rd.c.Offset())
}
