package procs

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// printed returns how many lines p has printed so far.
func printed(p *Process) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ring.nextSeq - 1
}

// waitPrinted waits until p has printed n lines.
func waitPrinted(t *testing.T, p *Process, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return printed(p) == n }, 20*time.Second, 5*time.Millisecond)
}

// footprints returns the sum of the rings' own footprints, each read under
// its process's lock, and checks that held and the budget's total agree.
// The budget hears of a ring's change just after its process's lock is
// released (budget.add must be called without it), so a line already
// printed may not be in the total yet: it waits until the total is the
// sum, which it must become.
func footprints(t *testing.T, r *Registry) int64 {
	t.Helper()
	var sum, total int64
	settled := func() bool {
		sum = 0
		r.budget.mu.Lock()
		defer r.budget.mu.Unlock()
		for p := range r.budget.members {
			p.mu.Lock()
			fp := int64(p.ring.footprint())
			assert.Equal(t, fp, p.held.Load(), "held follows the ring")
			p.mu.Unlock()
			sum += fp
		}
		total = r.budget.total.Load()
		return sum == total
	}
	if !settled() {
		require.Eventually(t, settled, 5*time.Second, time.Millisecond)
	}
	assert.Equal(t, sum, total, "the total is the sum of the rings")
	return sum
}

// padded returns a seq command printing n lines of 952 characters, the
// line numbers zero-padded: 1,000 bytes each as the ring counts them.
func padded(n int) string { return fmt.Sprintf("seq -f '%%0952g' 1 %d", n) }

// 50 running processes that each print more than the whole budget stay
// within it together, and account for every byte.
func TestBudgetBoundsManyProcesses(t *testing.T) {
	const budget = 1 << 20
	r := newTestRegistry(t, Options{MaxTotalBytes: budget, MaxLines: 100_000})
	var ps []*Process
	for range 50 {
		// 1,500 lines: 1.5 MB each, 75 MB together.
		p, err := r.Start(executor.Command{Cmd: padded(1500) + "; exec sleep 100"})
		require.NoError(t, err)
		ps = append(ps, p)
	}
	for _, p := range ps {
		waitPrinted(t, p, 1500)
	}
	sum := footprints(t, r)
	assert.LessOrEqual(t, sum, int64(budget))
	assert.Greater(t, sum, int64(budget/2), "the budget is used, not emptied")
	for _, p := range ps {
		assert.Equal(t, StatusRunning, p.Info().Status)
		assert.Positive(t, p.logBytes(), "every process keeps its newest lines")
	}
}

// The process that holds the most loses its oldest lines first; those
// that hold less lose nothing. Its readers are told how many lines they
// missed and then get the rest in order, with no gap and no duplicate.
func TestBudgetEvictsBiggestFirst(t *testing.T) {
	r := newTestRegistry(t, Options{MaxTotalBytes: 1 << 20, MaxLines: 100_000})
	big, err := r.Start(executor.Command{Cmd: padded(700) + "; exec sleep 100"})
	require.NoError(t, err)
	waitPrinted(t, big, 700)
	small, err := r.Start(executor.Command{Cmd: padded(100) + "; exec sleep 100"})
	require.NoError(t, err)
	waitPrinted(t, small, 100)

	// A reader of big that has read its first 10 lines.
	early := big.Subscribe(0)
	defer early.Close()
	lines, missed, _ := early.Read(make([]Line, 0, 10))
	require.Len(t, lines, 10)
	require.Zero(t, missed)
	require.LessOrEqual(t, footprints(t, r), int64(1<<20), "not over budget yet")

	// 300 more lines take the total over the budget.
	third, err := r.Start(executor.Command{Cmd: padded(300) + "; exec sleep 100"})
	require.NoError(t, err)
	waitPrinted(t, third, 300)
	assert.LessOrEqual(t, footprints(t, r), int64(1<<20))

	for _, p := range []*Process{small, third} {
		s := p.Subscribe(0)
		lines, missed, _ := s.Read(make([]Line, 0, 1000))
		s.Close()
		assert.Zero(t, missed, "a smaller consumer keeps every line")
		assert.Len(t, lines, int(printed(p)))
	}

	// big lost its oldest lines: the early reader is told how many, then
	// gets the rest, 11 to 700 less the missed ones, in order.
	lines, missed, _ = early.Read(make([]Line, 0, 1000))
	require.Positive(t, missed, "the biggest consumer was trimmed")
	assert.Less(t, missed, uint64(690), "down to the level, not emptied")
	require.Len(t, lines, 690-int(missed))
	for i, l := range lines {
		seq := 11 + missed + uint64(i)
		require.Equal(t, seq, l.Seq)
		n, err := strconv.ParseUint(strings.TrimLeft(string(l.Data), "0"), 10, 64)
		require.NoError(t, err)
		require.Equal(t, seq, n, "line %d holds its own data", seq)
	}
	// A new reader from the start gets the same, missed from line 1.
	fresh := big.Subscribe(0)
	defer fresh.Close()
	lines2, missed2, _ := fresh.Read(make([]Line, 0, 1000))
	assert.Equal(t, missed+10, missed2)
	assert.Equal(t, lines, lines2)
}

// The accounting holds through finish (which gives back empty slots),
// release and forgetting.
func TestBudgetAccountingThroughFinishAndForget(t *testing.T) {
	r := newTestRegistry(t, Options{MaxFinished: 2, MaxFinishedBytes: 150_000})
	for range 5 {
		p, err := r.Start(executor.Command{Cmd: padded(100)})
		require.NoError(t, err)
		waitDone(t, p)
		require.Eventually(t, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			last, _ := r.finished.Last()
			return last == p
		}, 5*time.Second, time.Millisecond)
	}
	// Forgotten processes are released by watch after retire: wait for it.
	require.Eventually(t, func() bool {
		r.budget.mu.Lock()
		defer r.budget.mu.Unlock()
		return len(r.budget.members) == 2
	}, 5*time.Second, time.Millisecond)
	// Two listed, the older of which lost its lines to MaxFinishedBytes.
	// Each held 100 lines in two chunks; finish let go of the spare.
	const each = 100*1000 + (2*chunkLines-100)*lineOverhead
	assert.Equal(t, int64(each), footprints(t, r))
	assert.Equal(t, int64(4*each), r.budget.freed.Load())
}

func TestReclaimAfterLargeRelease(t *testing.T) {
	var calls atomic.Int32
	b := newBudget(1000, time.Hour, func() { calls.Add(1) })
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.reclaim(quit)
	}()
	b.total.Add(1000)
	b.release(-100)
	b.release(-100) // a quarter of the budget not reached yet
	assert.Never(t, func() bool { return calls.Load() > 0 }, 50*time.Millisecond, time.Millisecond)
	b.release(-100)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(700), b.total.Load())
	b.release(-300) // within the interval: waits, and quit ends the wait
	close(quit)
	<-done
	assert.Equal(t, int32(1), calls.Load())
}

// lineOverhead is what a Line costs in a ring's slot.
func TestLineOverhead(t *testing.T) {
	assert.Equal(t, uintptr(lineOverhead), unsafe.Sizeof(Line{}))
}

func TestWaterLevel(t *testing.T) {
	tests := []struct {
		sizes  []int64
		target int64
		want   int64
	}{
		{nil, 100, 0},
		{[]int64{10, 20}, 100, 20}, // already fits: nobody is cut
		{[]int64{10, 100}, 60, 50}, // only the big one is cut
		{[]int64{10, 100, 100}, 110, 50},
		{[]int64{30, 30, 30}, 60, 20},  // all cut alike
		{[]int64{5, 500, 40}, 100, 55}, // order does not matter
		{[]int64{100, 100}, 0, 0},
	}
	for _, tt := range tests {
		sizes := make([]memberSize, len(tt.sizes))
		for i, s := range tt.sizes {
			sizes[i].bytes = s
		}
		level := waterLevel(sizes, tt.target)
		assert.Equal(t, tt.want, level, "%v to %d", tt.sizes, tt.target)
		var sum int64
		for _, s := range tt.sizes {
			sum += min(s, level)
		}
		assert.LessOrEqual(t, sum, max(tt.target, 0))
	}
}

// trimTo keeps the newest lines, whole and unchanged, within the limit,
// lets go of emptied chunks, and gives the lines left of a partly evicted
// batch their own allocation.
func TestRingTrimTo(t *testing.T) {
	rg := newRing(1000, 1<<20)
	var arenas [][]byte
	for batch := 0; batch < 20; batch++ { // 20 batches of 10 lines of 10 bytes
		var arena []byte
		for i := 0; i < 10; i++ {
			arena = fmt.Appendf(arena, "%010d", batch*10+i+1) // the line's Seq
		}
		arenas = append(arenas, arena)
		for i := 0; i < 10; i++ {
			rg.push(Line{first: i == 0, Data: arena[i*10 : i*10+10 : i*10+10]})
		}
	}
	require.Len(t, rg.chunks, 4) // 200 lines in 256 slots
	require.Equal(t, 256*lineOverhead+200*10, rg.footprint())

	// Within the oldest chunk, evicting frees only the data.
	rg.trimTo(rg.footprint() - 5*10)
	assert.Equal(t, 195, rg.n)
	assert.Equal(t, uint64(6), rg.oldest())
	assert.Len(t, rg.chunks, 4)
	head := rg.at(0)
	assert.True(t, head.first)
	assert.NotSame(t, &arenas[0][50], &head.Data[0], "copied out of the batch's allocation")
	assert.Same(t, &arenas[1][0], &rg.at(5).Data[0], "whole batches stay where they are")

	// Evicting the rest of the oldest chunk frees its data, then the chunk.
	rg.trimTo(rg.footprint() - 1000)
	assert.Len(t, rg.chunks, 3)
	assert.Nil(t, rg.spare, "no spare kept by a trim")
	assert.Equal(t, 136, rg.n)
	assert.Equal(t, 3*chunkLines*lineOverhead+136*10, rg.footprint())
	first := rg.oldest()
	assert.Equal(t, uint64(65), first)
	got := rg.appendFrom(nil, first, 1000)
	require.Len(t, got, rg.n)
	for i, l := range got {
		assert.Equal(t, fmt.Sprintf("%010d", first+uint64(i)), string(l.Data))
		assert.Equal(t, first+uint64(i), l.Seq)
	}

	rg.trimTo(0)
	assert.Zero(t, rg.footprint())
	assert.Nil(t, rg.chunks)
	assert.Equal(t, uint64(201), rg.oldest())
	rg.push(Line{Data: []byte("again")})
	assert.Equal(t, uint64(201), rg.appendFrom(nil, 201, 1)[0].Seq)
}

// A ring at its line bound recycles its chunks through the spare: it holds
// at most two chunks of empty slots.
func TestRingChunksAtTheBound(t *testing.T) {
	rg := newRing(200, 1<<20)
	for i := 0; i < 10_000; i++ {
		rg.push(Line{Data: []byte("x")})
		assert.LessOrEqual(t, rg.footprint(), 200*(lineOverhead+1)+2*chunkLines*lineOverhead)
	}
	assert.Equal(t, 200, rg.n)
	assert.Equal(t, uint64(9801), rg.oldest())
	assert.Equal(t, uint64(10000), rg.appendFrom(nil, 10000, 1)[0].Seq)
}
