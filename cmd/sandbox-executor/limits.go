package main

import (
	"os"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/cgroups"
	"github.com/sandbox-executor/sandbox-executor/executor"
)

// setLimits gives runner what it needs to apply per-command limits, probed
// once at start-up: ptrace where it works, which sets a command's rlimits
// without a second exec; the agent's own binary as the rlimit helper, for
// what ptrace cannot serve; and cgroup v2 leaves where the agent may make
// them. It must run before the reaper does (see executor.ProbePtrace).
func setLimits(runner *executor.Runner, log zerolog.Logger) {
	runner.Helper = helperPath()
	rlimits := "helper"
	if err := executor.ProbePtrace(runner.Helper); err != nil {
		log.Debug().Err(err).Msg("rlimits by ptrace unavailable: the helper sets them")
	} else {
		runner.Ptrace, rlimits = true, "ptrace"
	}
	cg, err := cgroups.Probe()
	if err != nil {
		log.Debug().Err(err).Msg("memory and pids limits unavailable")
	} else {
		runner.Cgroups = cg
	}
	s := runner.LimitSupport()
	log.Debug().Str("mechanism", s.Mechanism).Str("rlimits", rlimits).Msg("command limits")
}

// helperPath is the path the rlimit helper is run by. /proc/self/exe is
// the agent's binary in the child as in the agent, and reaches it for any
// user even where the binary's directory is closed to them (the magic
// link is not walked through its directories). Without /proc, the
// binary's own path.
func helperPath() string {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe"
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}
