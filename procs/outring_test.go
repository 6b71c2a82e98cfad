package procs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func TestOutRing(t *testing.T) {
	var r outRing
	r.write(executor.Stdout, []byte("before"), 0)
	r.keep(8)
	out, errb, missed, next := r.read(0)
	assert.Equal(t, []byte(nil), out)
	assert.Equal(t, []byte(nil), errb)
	assert.Equal(t, int64(6), missed) // written before keep
	assert.Equal(t, int64(6), next)

	r.write(executor.Stdout, []byte("ab"), 0)
	r.write(executor.Stderr, []byte("E"), 0)
	r.write(executor.Stdout, []byte("c"), 0)
	out, errb, missed, next = r.read(6)
	assert.Equal(t, "abc", string(out))
	assert.Equal(t, "E", string(errb))
	assert.Equal(t, int64(0), missed)
	assert.Equal(t, int64(10), next)

	// Past the ring: the oldest go, and a reader behind them is told.
	r.write(executor.Stderr, []byte("0123456"), 0)
	out, errb, missed, next = r.read(7)
	assert.Equal(t, "c", string(out))
	assert.Equal(t, "0123456", string(errb))
	assert.Equal(t, int64(2), missed)
	assert.Equal(t, int64(17), next)
	assert.Len(t, r.runs, 2)

	// A write longer than the ring keeps its end.
	r.write(executor.Stdout, []byte("xxxxxxxxxxyz"), 0)
	out, _, missed, next = r.read(17)
	assert.Equal(t, "xxxxxxyz", string(out))
	assert.Equal(t, int64(4), missed)
	assert.Equal(t, int64(29), next)

	out, errb, missed, next = r.read(29)
	assert.Empty(t, out)
	assert.Empty(t, errb)
	assert.Zero(t, missed)
	assert.Equal(t, int64(29), next)
}

// TestOutRingMarksStayBounded writes many reads: the marks thin out to at
// most maxMarks and still give a range that holds the bytes asked for.
func TestOutRingMarksStayBounded(t *testing.T) {
	var r outRing
	r.keep(1 << 20)
	seq := uint64(1)
	for i := 0; i < 5000; i++ {
		r.write(executor.Stdout, []byte("line\n"), seq) // 5 bytes: line i+1 is bytes 5i to 5i+4
		seq++
	}
	assert.LessOrEqual(t, len(r.marks), maxMarks)
	first, last, ok := r.lines(5*1000+2, 5*2000+1, seq)
	assert.True(t, ok)
	assert.Equal(t, uint64(1001), first, "counted from the last mark before it")
	assert.GreaterOrEqual(t, last, uint64(2001))
	assert.LessOrEqual(t, last, uint64(2100), "wider by at most the spacing of the thinned marks")
}
