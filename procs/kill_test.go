package procs

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// firstLine waits for p's first line and returns it.
func firstLine(t *testing.T, p *Process) string {
	t.Helper()
	s := p.Subscribe(0)
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lines, _, err := s.Next(ctx, make([]Line, 0, 1), true)
	require.NoError(t, err)
	return string(lines[0].Data)
}

// killed means died of a signal sent through Kill; a process that was sent
// one and then exited by itself has the status its exit gives it.
func TestKilledMeansDiedOfASentSignal(t *testing.T) {
	r := newTestRegistry(t, Options{})
	tests := []struct {
		name   string
		cmd    string
		sig    syscall.Signal
		status Status
		code   int
	}{
		// sleep's own group gets the signal; the shell dies of it too.
		{"SIGTERM", "echo ready; sleep 100", syscall.SIGTERM, StatusKilled, 143},
		{"SIGKILL", "echo ready; sleep 100", syscall.SIGKILL, StatusKilled, 137},
		// The shell survives and exits 0: it was not killed.
		{"trapped SIGTERM", "trap 'exit 0' TERM; sleep 100 & echo ready; wait", syscall.SIGTERM, StatusCompleted, 0},
		{"trapped SIGTERM, exit 3", "trap 'exit 3' TERM; sleep 100 & echo ready; wait", syscall.SIGTERM, StatusFailed, 3},
		// The shell reports that its child died of the signal: 128+15.
		// The child prints ready, so that it runs when the signal comes.
		{"shell reports its child", "trap 'true' TERM; sh -c 'echo ready; exec sleep 100'; exit $?", syscall.SIGTERM, StatusKilled, 143},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := r.Start(executor.Command{Cmd: tt.cmd})
			require.NoError(t, err)
			require.Equal(t, "ready", firstLine(t, p)) // the trap is set
			exited, err := r.Kill(t.Context(), p.ID, tt.sig)
			require.NoError(t, err)
			assert.False(t, exited)
			waitDone(t, p)
			info := p.Info()
			assert.Equal(t, tt.status, info.Status)
			assert.Equal(t, tt.code, *info.ExitCode)
		})
	}
}

// SIGCONT to a running process that then exits 0 leaves it completed.
func TestSignalThenOwnExitIsNotKilled(t *testing.T) {
	r := newTestRegistry(t, Options{})
	stop := filepath.Join(t.TempDir(), "stop")
	p, err := r.Start(executor.Command{Cmd: "echo ready; while [ ! -e " + stop + " ]; do sleep 0.01; done"})
	require.NoError(t, err)
	require.Equal(t, "ready", firstLine(t, p))
	_, err = r.Kill(t.Context(), p.ID, syscall.SIGCONT)
	require.NoError(t, err)
	assert.Equal(t, StatusRunning, p.Info().Status)
	require.NoError(t, os.WriteFile(stop, nil, 0o600))
	waitDone(t, p)
	assert.Equal(t, StatusCompleted, p.Info().Status)
	assert.Equal(t, 0, *p.Info().ExitCode)
}

// A process that dies of a signal the API sent only after another one it
// survived, or of a signal nobody sent through the API, is judged by what
// it died of.
func TestKilledOnlyBySentSignal(t *testing.T) {
	r := newTestRegistry(t, Options{})
	stop := filepath.Join(t.TempDir(), "stop")
	p, err := r.Start(executor.Command{Cmd: "trap '' TERM; echo ready; while [ ! -e " + stop + " ]; do sleep 0.01; done; kill -KILL $$"})
	require.NoError(t, err)
	require.Equal(t, "ready", firstLine(t, p))
	_, err = r.Kill(t.Context(), p.ID, syscall.SIGTERM) // ignored
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(stop, nil, 0o600))
	waitDone(t, p)
	assert.Equal(t, StatusFailed, p.Info().Status, "died of SIGKILL, which the API did not send")
	assert.Equal(t, 137, *p.Info().ExitCode)
}

// kill of a process whose command exited but left processes in its group
// (`npm start &`) signals them and succeeds; its status stays. Once the
// group is empty, it is refused as before.
//
// This needs executor.Process.Signal to reach a finished command's group
// (branch h8-exec); with an executor that refuses every finished command,
// the first Kill fails with ErrNotRunning.
func TestKillLeftoversOfFinishedProcess(t *testing.T) {
	r := newTestRegistry(t, Options{})
	// The background sleep keeps the pipes open: close them, so that the
	// command finishes as soon as its shell exits.
	p, err := r.Start(executor.Command{Cmd: "sleep 100 >/dev/null 2>&1 & echo $!"})
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(firstLine(t, p))
	require.NoError(t, err)
	waitDone(t, p)
	require.Equal(t, StatusCompleted, p.Info().Status)
	require.True(t, testutil.Alive(grandchild))

	exited, err := r.Kill(t.Context(), p.ID, syscall.SIGKILL)
	require.NoError(t, err)
	assert.True(t, exited)
	require.Eventually(t, func() bool { return !testutil.Alive(grandchild) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, StatusCompleted, p.Info().Status, "the status stays")

	require.Eventually(t, func() bool {
		_, err = r.Kill(t.Context(), p.ID, syscall.SIGKILL)
		return err != nil
	}, 5*time.Second, 10*time.Millisecond, "refused once the group is empty")
	assert.ErrorIs(t, err, ErrNotRunning)
	assert.EqualError(t, err, "process is not running (status: completed)")
}

// Last-Event-ID 18446744073709551615 is at the end, not a wrap-around to 0
// that replays every line.
func TestResumeAfterLargestSeq(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "seq 1 10"})
	require.NoError(t, err)
	waitDone(t, p)
	s := p.Subscribe(math.MaxUint64)
	defer s.Close()
	lines, missed, ended := s.Read(make([]Line, 0, 100))
	assert.Empty(t, lines)
	assert.Zero(t, missed)
	assert.True(t, ended)
	lines, missed = readAll(t, s, true)
	assert.Empty(t, lines)
	assert.Zero(t, missed)

	// Following a running process, such a reader waits for its end.
	p, err = r.Start(executor.Command{Cmd: "seq 1 10; sleep 0.1"})
	require.NoError(t, err)
	s2 := p.Subscribe(math.MaxUint64)
	defer s2.Close()
	lines, missed = readAll(t, s2, true)
	assert.Empty(t, lines)
	assert.Zero(t, missed)
}
