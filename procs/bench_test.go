package procs

import (
	"fmt"
	"testing"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// BenchmarkAddLines measures the producer's hot path: batches of 1,000
// short lines (one pipe read of seq's output) into a full ring, with a
// budget the rings fit in, and with one they overflow, so that trims run.
func BenchmarkAddLines(b *testing.B) {
	for _, tt := range []struct {
		name   string
		budget int64
		procs  int
	}{{"within budget", 1 << 30, 1}, {"trimming 50 rings", 4 << 20, 50}} {
		b.Run(tt.name, func(b *testing.B) {
			bud := newBudget(tt.budget, time.Hour, func() {})
			var ps []*Process
			for range tt.procs {
				p := &Process{budget: bud, ring: newRing(10_000, 8<<20), subs: map[*Subscription]struct{}{}}
				bud.join(p)
				ps = append(ps, p)
			}
			batch := make([][]byte, 1000)
			for i := range batch {
				batch[i] = fmt.Appendf(nil, "%d", 1_000_000+i)
			}
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ps[i%len(ps)].addLines(executor.Stdout, now, batch)
			}
			b.ReportMetric(float64(b.N)*float64(len(batch))/b.Elapsed().Seconds(), "lines/s")
		})
	}
}
