package executor

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTermination(t *testing.T) {
	sentTERM := func(sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	tests := []struct {
		name       string
		res        Result
		sent       func(syscall.Signal) bool
		clientGone bool
		want       Termination
	}{
		{"exit 0", Result{Code: 0}, nil, false, Termination{Reason: ReasonExit}},
		{"exit 3", Result{Code: 3}, sentTERM, false, Termination{Reason: ReasonExit}},
		{"own 143", Result{Code: 143}, nil, false, Termination{Reason: ReasonExit}},
		{"shell reports a sent TERM", Result{Code: 143}, sentTERM, false, Termination{Reason: ReasonKilled, Signal: "SIGTERM"}},
		{"died of SEGV", Result{Code: 139, Signal: syscall.SIGSEGV}, sentTERM, false, Termination{Reason: ReasonSignal, Signal: "SIGSEGV"}},
		{"died of a sent TERM", Result{Code: 143, Signal: syscall.SIGTERM}, sentTERM, false, Termination{Reason: ReasonKilled, Signal: "SIGTERM"}},
		{"timeout", Result{Code: ExitTimedOut, Signal: syscall.SIGKILL, TimedOut: true}, nil, false, Termination{Reason: ReasonTimeout}},
		{"client gone", Result{Code: 137, Signal: syscall.SIGKILL}, nil, true, Termination{Reason: ReasonClientGone}},
		// A limit that fired is named before anything else.
		{"cpu limit", Result{Code: 152, Signal: syscall.SIGXCPU, Limit: ReasonCPULimit}, nil, false, Termination{Reason: ReasonCPULimit, Signal: "SIGXCPU"}},
		{"file size limit, shell's 153", Result{Code: 153, Limit: ReasonFileSizeLimit}, sentTERM, true, Termination{Reason: ReasonFileSizeLimit, Signal: "SIGXFSZ"}},
		{"memory limit before the timer", Result{Code: ExitTimedOut, Signal: syscall.SIGKILL, TimedOut: true, Limit: ReasonMemoryLimit}, nil, false, Termination{Reason: ReasonMemoryLimit, Signal: "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.res.Termination(tt.sent, tt.clientGone))
		})
	}
}

// TestTerminationOfRealCommands checks the reasons of commands that really
// end so: a signal the command sent itself, and the timer.
func TestTerminationOfRealCommands(t *testing.T) {
	var r Runner
	out, err := r.Run(context.Background(), Command{Cmd: "kill -SEGV $$"})
	require.NoError(t, err)
	assert.Equal(t, Termination{Reason: ReasonSignal, Signal: "SIGSEGV"}, out.Termination(nil, false))

	out, err = r.Run(context.Background(), Command{Cmd: "sleep 30", Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, Termination{Reason: ReasonTimeout}, out.Termination(nil, false))

	out, err = r.Run(context.Background(), Command{Argv: []string{"false"}})
	require.NoError(t, err)
	assert.Equal(t, Termination{Reason: ReasonExit}, out.Termination(nil, false))
}
