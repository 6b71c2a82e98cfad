package executor

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Termination says why a command ended, as replies that opt into it
// report it: {"reason": "exit"} for its own exit, {"reason": "signal",
// "signal": "SIGSEGV"} for a signal nobody here sent, and so on.
type Termination struct {
	Reason string `json:"reason"`           // one of the Reason... constants
	Signal string `json:"signal,omitempty"` // the signal's name ("SIGTERM"), where one ended it
}

// The reasons of a Termination.
const (
	ReasonExit       = "exit"        // the command exited by itself
	ReasonSignal     = "signal"      // a signal the agent did not send
	ReasonTimeout    = "timeout"     // the agent's timer
	ReasonKilled     = "killed"      // a signal sent through the API (kill_process, an exec stream's signal)
	ReasonClientGone = "client_gone" // the request that owned it left
)

// Termination returns why the command of res ended: the limit that fired
// first (see LimitTermination), then its timeout, its client gone, its own
// exit, or a signal, killed if sent through the API. sent reports whether
// sig was sent to the command through the API (kill_process, an exec
// stream's signal message), nil meaning none was; clientGone whether the
// request that owned the command left before it ended, and so had it
// killed. A shell that exited with 128+n counts as killed by signal n only
// if n was sent through the API: it is reporting that the child it waited
// for died of it. Any other 128+n is the command's own exit status.
func (res Result) Termination(sent func(sig syscall.Signal) bool, clientGone bool) Termination {
	if t, ok := LimitTermination(res); ok {
		return t
	}
	sig := res.Signal
	if sig == 0 && res.Code > 128 && res.Code <= 128+64 && sent != nil && sent(syscall.Signal(res.Code-128)) {
		sig = syscall.Signal(res.Code - 128)
	}
	switch {
	case res.TimedOut:
		return Termination{Reason: ReasonTimeout}
	case clientGone:
		return Termination{Reason: ReasonClientGone}
	case sig == 0:
		return Termination{Reason: ReasonExit}
	case sent != nil && sent(sig):
		return Termination{Reason: ReasonKilled, Signal: SignalName(sig)}
	}
	return Termination{Reason: ReasonSignal, Signal: SignalName(sig)}
}

// SignalName returns the name of sig, such as "SIGTERM", or its number
// for one the system has no name for.
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return strconv.Itoa(int(sig))
}
