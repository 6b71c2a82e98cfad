package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// waitEnded waits until process id is no longer running and returns it.
func waitEnded(t *testing.T, c *client.Client, id string) client.Process {
	t.Helper()
	var got client.Process
	require.Eventually(t, func() bool {
		ps, err := c.ListProcesses(t.Context())
		require.NoError(t, err)
		for _, p := range ps {
			if p.ID == id {
				got = p
				return p.Status != client.StatusRunning
			}
		}
		t.Fatalf("process %s not listed", id)
		return false
	}, 10*time.Second, 10*time.Millisecond)
	return got
}

func TestStartListKill(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: "trap 'exit 0' TERM; echo started; while :; do sleep 0.05; done"})
	require.NoError(t, err)
	assert.Len(t, p.ID, 36)
	assert.Positive(t, p.PID)
	assert.Equal(t, client.StatusRunning, p.Status)

	ps, err := a.c.ListProcesses(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, p.ID, ps[0].ID)
	assert.Equal(t, p.PID, ps[0].PID)
	assert.Contains(t, ps[0].Command, "trap")
	assert.Nil(t, ps[0].ExitCode)
	assert.WithinDuration(t, time.Now(), ps[0].StartedAt, time.Minute)
	assert.True(t, ps[0].CompletedAt.IsZero())

	// Wait for the trap to be set before signalling.
	for ev, err := range a.c.ProcessLogs(ctx, p.ID, client.LogsOptions{}) {
		require.NoError(t, err)
		require.Equal(t, "started", string(ev.Data))
		break
	}
	require.NoError(t, a.c.KillProcess(ctx, p.ID, "SIGTERM"))
	got := waitEnded(t, a.c, p.ID)
	require.NotNil(t, got.ExitCode)
	assert.False(t, got.CompletedAt.IsZero())

	p2, err := a.c.StartProcess(ctx, client.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	require.NoError(t, a.c.KillProcess(ctx, p2.ID, ""))
	assert.Equal(t, client.StatusKilled, waitEnded(t, a.c, p2.ID).Status)
	assert.False(t, testutil.Alive(p2.PID))
}

func TestProcessLogs(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: "echo one; echo two >&2; echo three"})
	require.NoError(t, err)
	waitEnded(t, a.c, p.ID)

	type line struct {
		seq    uint64
		stream client.Stream
		data   string
	}
	read := func(opts client.LogsOptions) ([]line, client.Event) {
		var lines []line
		var last client.Event
		for ev, err := range a.c.ProcessLogs(ctx, p.ID, opts) {
			require.NoError(t, err)
			last = ev
			if ev.Type == client.EventLog {
				assert.WithinDuration(t, time.Now(), ev.Time, time.Minute)
				lines = append(lines, line{ev.Seq, ev.Stream, string(ev.Data)})
			}
		}
		return lines, last
	}
	lines, last := read(client.LogsOptions{})
	// stdout and stderr are separate pipes: their relative order is the
	// agent's reading order, so only each stream's own order is checked.
	require.Len(t, lines, 3)
	byData := map[string]line{}
	for i, l := range lines {
		assert.Equal(t, uint64(i+1), l.seq)
		byData[l.data] = l
	}
	assert.Equal(t, client.Stderr, byData["two"].stream)
	assert.Equal(t, client.Stdout, byData["one"].stream)
	assert.Less(t, byData["one"].seq, byData["three"].seq)
	assert.Equal(t, client.EventComplete, last.Type)
	assert.Equal(t, "stream ended", last.Message)

	after, _ := read(client.LogsOptions{After: 2, NoFollow: true})
	assert.Equal(t, lines[2:], after)
}

// TestFollowLogsAcrossCuts reads a process's log through a relay that
// cuts the first three connections at arbitrary bytes, some while the log
// is replayed and some while it is followed live: every line must arrive
// exactly once, in order.
func TestFollowLogsAcrossCuts(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	gate := filepath.Join(t.TempDir(), "gate")
	const half, total = 2000, 4000
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: fmt.Sprintf(
		`seq 1 %d; while [ ! -e %s ]; do sleep 0.01; done; seq %d %d`, half, gate, half+1, total)})
	require.NoError(t, err)

	r := startRelay(t, a.ts.Listener.Addr().String(), []int64{37_001, 41_234, 150_000}, nil)
	c := newClient(t, a.ts, "http://"+r.addr, testSecret)
	seen := make([]int, total+1)
	next := uint64(1)
	var end client.Event
	for ev, err := range c.FollowLogs(ctx, p.ID, client.LogsOptions{RetryDelay: time.Millisecond}) {
		require.NoError(t, err)
		require.NotEqual(t, client.EventMissed, ev.Type, "nothing was evicted")
		if ev.Type == client.EventComplete {
			end = ev
			break
		}
		require.Equal(t, next, ev.Seq, "in order, without a gap")
		next++
		n, err := strconv.Atoi(string(ev.Data))
		require.NoError(t, err)
		seen[n]++
		if n == half {
			require.NoError(t, os.WriteFile(gate, nil, 0o644)) // the rest comes live
		}
	}
	assert.Equal(t, client.EventComplete, end.Type)
	for n := 1; n <= total; n++ {
		require.Equal(t, 1, seen[n], "line %d", n)
	}
	assert.Equal(t, 4, r.accepted(), "three cuts, three reconnections")
}

// TestFollowLogsMissed cuts the stream, and keeps the follower away while
// the process prints more than the ring holds: on its return it gets a
// missed event for exactly the lines it lost, then the rest, once each.
func TestFollowLogsMissed(t *testing.T) {
	const ring, total = 100, 1000
	a := startAgent(t, agentConfig{procs: procs.Options{MaxLines: ring}})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	gate := filepath.Join(t.TempDir(), "gate")
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: fmt.Sprintf(
		`seq 1 50; while [ ! -e %s ]; do sleep 0.01; done; seq 51 %d`, gate, total)})
	require.NoError(t, err)
	proc, err := a.reg.Get(p.ID)
	require.NoError(t, err)

	hold := make(chan struct{})
	r := startRelay(t, a.ts.Listener.Addr().String(), []int64{2_000}, hold)
	c := newClient(t, a.ts, "http://"+r.addr, testSecret)
	// Once the follower is back and held by the relay, the process runs
	// past the ring and ends; then the follower is let through.
	released := make(chan error, 1)
	go func() {
		defer close(hold)
		for r.accepted() < 2 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			released <- err
			return
		}
		select {
		case <-proc.Done():
			released <- nil
		case <-ctx.Done():
			released <- ctx.Err()
		}
	}()

	var before, after []uint64 // line numbers before and after the missed event
	var missed *client.Event
	for ev, err := range c.FollowLogs(ctx, p.ID, client.LogsOptions{RetryDelay: time.Millisecond}) {
		require.NoError(t, err)
		switch {
		case ev.Type == client.EventMissed:
			require.Nil(t, missed, "one missed event")
			missed = &ev
		case ev.Type == client.EventLog && missed == nil:
			before = append(before, ev.Seq)
		case ev.Type == client.EventLog:
			after = append(after, ev.Seq)
		}
		if ev.Type == client.EventLog {
			require.Equal(t, strconv.FormatUint(ev.Seq, 10), string(ev.Data))
		}
	}
	require.NoError(t, <-released)
	require.NotNil(t, missed)
	assert.Contains(t, missed.Message, "dropped")
	k := uint64(len(before))
	require.Positive(t, k)
	assert.Equal(t, seqRange(1, k), before)
	assert.Equal(t, uint64(total-ring)-k, missed.Missed, "missed counts exactly the lines between")
	assert.Equal(t, seqRange(total-ring+1, total), after)
}

// seqRange returns from, from+1, ..., to.
func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for n := from; n <= to; n++ {
		s = append(s, n)
	}
	return s
}
