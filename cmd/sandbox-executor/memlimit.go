package main

import (
	"runtime/debug"

	"github.com/rs/zerolog"
)

// memoryHeadroom is what the agent's soft memory limit allows beyond twice
// the log budget: request bodies, /run captures, buffers of streams.
const memoryHeadroom = 128 << 20

// setMemoryLimit gives the Go runtime a soft memory limit of twice the log
// budget plus memoryHeadroom (384 MiB with the default budget), unless
// GOMEMLIMIT is set, which the runtime has then read itself. The log
// lines are the agent's one large live set, bounded by the budget; with
// the runtime's default of collecting only when the heap has doubled, a
// budget filled by chatty processes would cost twice its size and more in
// RSS. Near the limit the runtime collects sooner instead, trading CPU
// for memory (never more than half of it), so the agent stays small
// beside the commands it runs in a sandbox of 1 GB or less.
//
// The input and session environment budgets are left out on purpose:
// counting them (704 MiB by default) let the heap of figure 9's 500
// chatty processes grow to 429 MB before a collection, where this limit
// holds it near 330. Those budgets are rarely full; when they are, the
// collector runs more often, which the runtime caps at half the CPU.
func (o options) setMemoryLimit(log zerolog.Logger, getenv func(string) string, logBudget int) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	set := o.memoryLimit
	if set == nil {
		set = debug.SetMemoryLimit
	}
	limit := int64(2*logBudget) + memoryHeadroom
	set(limit)
	log.Debug().Int64("bytes", limit).Msg("soft memory limit")
}
