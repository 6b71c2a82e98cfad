package procs

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func TestOutRing(t *testing.T) {
	var r outRing
	r.write(executor.Stdout, []byte("before"))
	r.keep(8)
	out, errb, missed, next := r.read(0)
	assert.Equal(t, []byte(nil), out)
	assert.Equal(t, []byte(nil), errb)
	assert.Equal(t, int64(6), missed) // written before keep
	assert.Equal(t, int64(6), next)

	r.write(executor.Stdout, []byte("ab"))
	r.write(executor.Stderr, []byte("E"))
	r.write(executor.Stdout, []byte("c"))
	out, errb, missed, next = r.read(6)
	assert.Equal(t, "abc", string(out))
	assert.Equal(t, "E", string(errb))
	assert.Equal(t, int64(0), missed)
	assert.Equal(t, int64(10), next)

	// Past the ring: the oldest go, and a reader behind them is told.
	r.write(executor.Stderr, []byte("0123456"))
	out, errb, missed, next = r.read(7)
	assert.Equal(t, "c", string(out))
	assert.Equal(t, "0123456", string(errb))
	assert.Equal(t, int64(2), missed)
	assert.Equal(t, int64(17), next)
	assert.Len(t, r.runs, 2)

	// A write longer than the ring keeps its end.
	r.write(executor.Stdout, []byte("xxxxxxxxxxyz"))
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
