package procs

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func policy(name string, maxRestarts int, backoff time.Duration) *RestartPolicy {
	return &RestartPolicy{Policy: name, MaxRestarts: maxRestarts, Backoff: backoff, MaxBackoff: 30 * time.Second}
}

func TestRestartOnFailure(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.StartWith(executor.Command{Cmd: "echo run; exit 1"}, StartOptions{Restart: policy(RestartOnFailure, 3, 500*time.Millisecond)})
	require.NoError(t, err)
	sub := p.Subscribe(0)
	defer sub.Close()
	all, missed := readAll(t, sub, true)
	assert.Zero(t, missed)

	// 4 runs, 3 restart events between them, in order; lines numbered
	// 1 to 4 across the runs, events taking no number.
	var kinds []string
	var runs []Line
	var events []RestartEvent
	for _, l := range all {
		if l.IsEvent() {
			kinds = append(kinds, "restart")
			var ev RestartEvent
			require.NoError(t, json.Unmarshal(l.Data, &ev))
			events = append(events, ev)
			continue
		}
		kinds = append(kinds, string(l.Data))
		runs = append(runs, l)
	}
	assert.Equal(t, []string{"run", "restart", "run", "restart", "run", "restart", "run"}, kinds)
	require.Len(t, runs, 4)
	for i, l := range runs {
		assert.Equal(t, uint64(i+1), l.Seq)
	}
	one := 1
	for i, want := range []int64{500, 1000, 2000} {
		assert.Equal(t, RestartEvent{Restart: i + 1, ExitCode: &one, Termination: executor.Termination{Reason: "exit"}, DelayMS: want}, events[i])
		// The delay between two runs, ± scheduling.
		gap := runs[i+1].Time().Sub(runs[i].Time())
		assert.GreaterOrEqual(t, gap, time.Duration(want)*time.Millisecond)
		assert.Less(t, gap, time.Duration(want)*time.Millisecond+time.Second)
	}
	info := p.Info()
	assert.Equal(t, StatusFailed, info.Status)
	assert.Equal(t, 3, info.Restarts)

	// A reader that comes later gets the same, events replayed.
	late := p.Subscribe(0)
	defer late.Close()
	again, _ := readAll(t, late, false)
	assert.Equal(t, all, again)
	// One that resumes after line 2 gets the event after it, then 3 and 4.
	resumed := p.Subscribe(2)
	defer resumed.Close()
	rest, _ := readAll(t, resumed, false)
	require.Len(t, rest, 4)
	assert.True(t, rest[0].IsEvent())
	assert.Contains(t, string(rest[0].Data), `"restart":2`)
	assert.Equal(t, uint64(3), rest[1].Seq)
}

func TestRestartAlways(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.StartWith(executor.Command{Cmd: "echo ok"}, StartOptions{Restart: policy(RestartAlways, 2, 10*time.Millisecond)})
	require.NoError(t, err)
	waitDone(t, p)
	info := p.Info()
	assert.Equal(t, StatusCompleted, info.Status, "after the last restart, the status follows the last exit")
	assert.Equal(t, 2, info.Restarts)

	// on-failure does not restart an exit 0; never never restarts.
	for _, pol := range []string{RestartOnFailure, RestartNever} {
		p, err = r.StartWith(executor.Command{Cmd: "exit 0"}, StartOptions{Restart: policy(pol, 5, 10*time.Millisecond)})
		require.NoError(t, err)
		waitDone(t, p)
		assert.Equal(t, 0, p.Info().Restarts, pol)
	}
	p, err = r.StartWith(executor.Command{Cmd: "exit 1"}, StartOptions{Restart: policy(RestartNever, 5, 10*time.Millisecond)})
	require.NoError(t, err)
	waitDone(t, p)
	assert.Equal(t, 0, p.Info().Restarts)
}

func TestRestartStopsAtKill(t *testing.T) {
	r := newTestRegistry(t, Options{})
	// Killed while it runs: no restart follows, whatever the policy.
	p, err := r.StartWith(executor.Command{Cmd: "sleep 100"}, StartOptions{Restart: policy(RestartAlways, -1, 10*time.Millisecond)})
	require.NoError(t, err)
	_, err = r.Kill(t.Context(), p.ID, syscall.SIGKILL)
	require.NoError(t, err)
	waitDone(t, p)
	assert.Equal(t, StatusKilled, p.Info().Status)
	assert.Equal(t, 0, p.Info().Restarts)

	// Killed while it waits to restart.
	p, err = r.StartWith(executor.Command{Cmd: "exit 1"}, StartOptions{Restart: policy(RestartOnFailure, -1, 10*time.Second)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Info().Restarts == 1 }, 5*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err = r.Kill(ctx, p.ID, syscall.SIGKILL)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second, "not after the delay")
	waitDone(t, p)
	info := p.Info()
	assert.Equal(t, StatusKilled, info.Status)
	assert.Equal(t, 1, info.Restarts)
	assert.Equal(t, 1, *info.ExitCode, "the last run's")
}

func TestRestartBackoffResets(t *testing.T) {
	p := &Process{restart: policy(RestartAlways, -1, 100*time.Millisecond), subs: map[*Subscription]struct{}{}, ring: newRing(10, 1000)}
	p.restart.MaxBackoff = 350 * time.Millisecond
	var delays []time.Duration
	for _, ran := range []time.Duration{0, 0, 0, 0, time.Minute, 0} {
		d, ok := p.nextRun(executor.Result{Code: 1}, ran)
		require.True(t, ok)
		delays = append(delays, d)
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, 200 * ms, 350 * ms, 350 * ms, 100 * ms, 200 * ms}, delays)
}

// TestRestartPolled: a process with a restart policy started for polls
// (as /run's yield_ms starts one) returns the bytes of every run in
// order and no restart event, and its termination is the one computation
// of it: the last run's exit, or killed once Kill stopped it between two
// runs.
func TestRestartPolled(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.StartWith(executor.Command{Cmd: "echo run; exit 1"},
		StartOptions{Polled: true, Restart: policy(RestartOnFailure, 2, 50*time.Millisecond)})
	require.NoError(t, err)
	waitDone(t, p)
	o, err := p.ReadOutput(nil, 1<<20, 0)
	require.NoError(t, err)
	assert.Equal(t, "run\nrun\nrun\n", string(o.Stdout))
	assert.Zero(t, o.Missed)
	assert.Equal(t, StatusFailed, o.Info.Status)
	assert.Equal(t, &executor.Termination{Reason: executor.ReasonExit}, o.Termination)

	p, err = r.StartWith(executor.Command{Cmd: "echo run; exit 1"},
		StartOptions{Polled: true, Restart: policy(RestartAlways, -1, time.Hour)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		o, err := p.ReadOutput(new(int64), 1<<20, 0)
		return err == nil && string(o.Stdout) == "run\n" && p.Info().Result != nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, &executor.Termination{Reason: executor.ReasonExit}, p.LastTermination(), "running, with its last run's termination")
	assert.Nil(t, p.Termination(), "it runs on while it waits to restart")
	_, err = r.Kill(context.Background(), p.ID, syscall.SIGTERM)
	require.NoError(t, err)
	waitDone(t, p)
	assert.Equal(t, &executor.Termination{Reason: executor.ReasonKilled}, p.Termination())
	assert.Equal(t, StatusKilled, p.Info().Status)
}
