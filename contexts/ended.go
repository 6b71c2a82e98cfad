package contexts

import (
	"fmt"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// limitKeys name the limit behind each termination reason, as a request's
// "limits" names it.
var limitKeys = map[string]string{
	executor.ReasonCPULimit:      "cpu_seconds",
	executor.ReasonFileSizeLimit: "file_size_bytes",
	executor.ReasonMemoryLimit:   "memory_bytes",
	executor.ReasonPidsLimit:     "pids",
}

// endOf returns the termination of an interpreter that ended by itself
// (its own exit, a signal the agent did not send, or one of its limits)
// and a phrase that says so, such as "its interpreter was killed by its
// cpu_seconds limit (SIGXCPU)".
func endOf(res executor.Result) (executor.Termination, string) {
	t := res.Termination(nil, false)
	switch {
	case t.Reason == executor.ReasonExit:
		return t, fmt.Sprintf("its interpreter exited with code %d", res.Code)
	case limitKeys[t.Reason] != "":
		how := "killed"
		if t.Signal == "" {
			how = "ended"
		}
		msg := fmt.Sprintf("its interpreter was %s by its %s limit", how, limitKeys[t.Reason])
		if t.Signal != "" {
			msg += " (" + t.Signal + ")"
		}
		return t, msg
	}
	return t, "its interpreter was killed by " + t.Signal
}

// limitsText is l as a request's "limits" would say it: "open_files=8, cpu_seconds=5".
func limitsText(l executor.Limits) string {
	var parts []string
	for _, kv := range []struct {
		k string
		v int64
	}{{"cpu_seconds", l.CPUSeconds}, {"file_size_bytes", l.FileSizeBytes}, {"open_files", l.OpenFiles},
		{"memory_bytes", l.MemoryBytes}, {"pids", l.Pids}} {
		if kv.v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", kv.k, kv.v))
		}
	}
	return strings.Join(parts, ", ")
}

// startFailure is the error of an interpreter that ended before its
// worker was ready: with limits, most likely too low for it to start
// (ErrLimitsTooLow); without, an interpreter too old or broken (ErrStart).
// It says how the interpreter ended, if own (it ended by itself, res),
// and the last line of its stderr. Its readers must be done.
func startFailure(it *interp, res executor.Result, own bool, spec language, l executor.Limits) error {
	detail := "its worker closed its pipe"
	if own {
		_, detail = endOf(res)
	}
	line := it.earlyError()
	if line != "" {
		detail += ": " + line
	}
	// The rlimit helper says why it could not run the interpreter (not
	// found, not executable by the user) as "sandbox-executor: ..." and
	// exits 126: that is no limit's doing.
	helperFailed := own && res.Code == 126 && strings.HasPrefix(line, "sandbox-executor:")
	if !l.IsZero() && !helperFailed {
		return fmt.Errorf("%w (%s): %s before it was ready; raise them", ErrLimitsTooLow, limitsText(l), detail)
	}
	return fmt.Errorf("%w: %s before it was ready (%s on PATH may be too old)", ErrStart, detail, spec.binary)
}
