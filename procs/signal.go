package procs

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// signals are the names ParseSignal knows, without their "SIG" prefix.
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT,
	"ALRM": syscall.SIGALRM, "PIPE": syscall.SIGPIPE, "ABRT": syscall.SIGABRT,
	"TSTP": syscall.SIGTSTP, "WINCH": syscall.SIGWINCH,
}

// ParseSignal parses a signal given as a name ("SIGTERM", "TERM", "term")
// or a number ("15"). Empty means SIGKILL, the documented default.
func ParseSignal(s string) (syscall.Signal, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return syscall.SIGKILL, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("unknown signal: %s", s)
		}
		return syscall.Signal(n), nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig, ok := signals[name]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal: %s", s)
}

// SignalName returns the name of sig with its "SIG" prefix, or its number
// if ParseSignal does not know it.
func SignalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return "SIG" + name
		}
	}
	return strconv.Itoa(int(sig))
}
