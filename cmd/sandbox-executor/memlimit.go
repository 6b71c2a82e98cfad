package main

import (
	"runtime/debug"

	"github.com/rs/zerolog"
)

// memoryHeadroom is what the agent's soft memory limit allows beyond its
// budgets: request bodies, /run captures, buffers of streams.
const memoryHeadroom = 128 << 20

// memoryBudgets are the bytes the agent may hold by its own bounds: log
// lines, commands' input not yet read, and sessions' environments.
type memoryBudgets struct {
	logs, input, sessionEnvs int64
}

// setMemoryLimit gives the Go runtime a soft memory limit of twice the log
// budget, plus the input and session environment budgets, plus
// memoryHeadroom (704 MiB with the default budgets), unless GOMEMLIMIT is
// set, which the runtime has then read itself. The log lines are the
// agent's one large live set in steady use, bounded by their budget; with
// the runtime's default of collecting only when the heap has doubled, a
// budget filled by chatty processes would cost twice its size and more in
// RSS. Input and environments are live until released, so they count
// once: a limit below the live set would make the collector run without
// end. Near the limit the runtime collects sooner instead, trading CPU
// for memory (never more than half of it), so the agent stays small
// beside the commands it runs.
func (o options) setMemoryLimit(log zerolog.Logger, getenv func(string) string, b memoryBudgets) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	set := o.memoryLimit
	if set == nil {
		set = debug.SetMemoryLimit
	}
	limit := 2*b.logs + b.input + b.sessionEnvs + memoryHeadroom
	set(limit)
	log.Debug().Int64("bytes", limit).Msg("soft memory limit")
}
