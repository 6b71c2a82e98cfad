package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestRegistry(t *testing.T, opts Options) *Registry {
	t.Helper()
	r := NewRegistry(&executor.Runner{DrainDelay: 500 * time.Millisecond}, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Close(ctx))
	})
	return r
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("process %s did not end", p.ID)
	}
}

// readAll follows s to the end and returns the lines and the total missed.
func readAll(t *testing.T, s *Subscription, follow bool) ([]Line, uint64) {
	t.Helper()
	all, missed, err := followToEnd(t.Context(), s, follow)
	require.NoError(t, err)
	return all, missed
}

// followToEnd is readAll for goroutines other than the test's, which may
// not call require: it returns the error instead.
func followToEnd(ctx context.Context, s *Subscription, follow bool) ([]Line, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var all []Line
	var missed uint64
	buf := make([]Line, 0, 256)
	for {
		lines, m, err := s.Next(ctx, buf[:0], follow)
		all = append(all, lines...)
		missed += m
		if errors.Is(err, io.EOF) {
			return all, missed, nil
		}
		if err != nil {
			return all, missed, err
		}
	}
}

func TestStatusesAndInfo(t *testing.T) {
	r := newTestRegistry(t, Options{})
	tests := []struct {
		cmd    string
		status Status
		code   int
	}{
		{"true", StatusCompleted, 0},
		{"exit 3", StatusFailed, 3},
		{"kill -KILL $$", StatusFailed, 137}, // a signal not sent through Kill
	}
	for _, tt := range tests {
		p, err := r.Start(executor.Command{Cmd: tt.cmd})
		require.NoError(t, err)
		waitDone(t, p)
		info := p.Info()
		assert.Equal(t, tt.status, info.Status, tt.cmd)
		require.NotNil(t, info.ExitCode)
		assert.Equal(t, tt.code, *info.ExitCode, tt.cmd)
		assert.False(t, info.CompletedAt.IsZero())
		assert.Equal(t, tt.cmd, info.Command)
		assert.Positive(t, info.PID)
	}
	infos := r.List()
	require.Len(t, infos, 3)
	for i, tt := range tests {
		assert.Equal(t, tt.cmd, infos[i].Command, "listed in start order")
	}
}

// startWithGrandchild starts a process whose shell waits for a background
// sleep, and returns it with the sleep's pid, read from its first line.
func startWithGrandchild(t *testing.T, r *Registry) (*Process, int) {
	t.Helper()
	p, err := r.Start(executor.Command{Cmd: "sleep 100 & echo $!; wait"})
	require.NoError(t, err)
	s := p.Subscribe(0)
	defer s.Close()
	lines, _, err := s.Next(t.Context(), make([]Line, 0, 1), true)
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(string(lines[0].Data))
	require.NoError(t, err)
	return p, grandchild
}

func TestKillGroupAndStatuses(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, grandchild := startWithGrandchild(t, r)
	assert.Equal(t, StatusRunning, p.Info().Status)
	assert.Nil(t, p.Info().ExitCode)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	exited, err := r.Kill(ctx, p.ID, syscall.SIGKILL)
	require.NoError(t, err)
	assert.False(t, exited)
	assert.Equal(t, StatusKilled, p.Info().Status, "Kill with SIGKILL returns once the process is gone")
	require.Eventually(t, func() bool { return !testutil.Alive(grandchild) }, 5*time.Second, 10*time.Millisecond)

	_, err = r.Kill(ctx, p.ID, syscall.SIGKILL)
	assert.ErrorIs(t, err, ErrNotRunning)
	assert.EqualError(t, err, "process is not running (status: killed)")
	_, err = r.Kill(ctx, "nope", syscall.SIGKILL)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.EqualError(t, err, "process not found: nope")
}

func TestKillWithTermIsKilled(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	_, err = r.Kill(t.Context(), p.ID, syscall.SIGTERM)
	require.NoError(t, err)
	waitDone(t, p)
	info := p.Info()
	assert.Equal(t, StatusKilled, info.Status)
	assert.Equal(t, 128+int(syscall.SIGTERM), *info.ExitCode)
}

func TestLogsInOrderBacklogThenLive(t *testing.T) {
	r := newTestRegistry(t, Options{})
	// Lines alternate between stdout and stderr; the merged order must be
	// the order they were read, and seqs consecutive.
	p, err := r.Start(executor.Command{Cmd: `for i in $(seq 1 200); do echo "o$i"; echo "e$i" >&2; done; read x < /dev/null; sleep 0.2; echo last`})
	require.NoError(t, err)
	// Subscribe while it runs: part backlog, part live.
	require.Eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.ring.n > 10 }, 5*time.Second, time.Millisecond)
	s := p.Subscribe(0)
	defer s.Close()
	lines, missed := readAll(t, s, true)
	assert.Zero(t, missed)
	require.Len(t, lines, 401)
	for i, l := range lines {
		assert.Equal(t, uint64(i+1), l.Seq)
	}
	var out, errs []string
	for _, l := range lines {
		if l.Stream == executor.Stdout {
			out = append(out, string(l.Data))
		} else {
			errs = append(errs, string(l.Data))
		}
	}
	require.Len(t, out, 201)
	for i := 0; i < 200; i++ {
		assert.Equal(t, fmt.Sprintf("o%d", i+1), out[i])
		assert.Equal(t, fmt.Sprintf("e%d", i+1), errs[i])
	}
	assert.Equal(t, "last", out[200])
}

func TestResumeAfterSeq(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "seq 1 50"})
	require.NoError(t, err)
	waitDone(t, p)
	s := p.Subscribe(20)
	defer s.Close()
	lines, missed := readAll(t, s, true)
	assert.Zero(t, missed)
	require.Len(t, lines, 30)
	assert.Equal(t, "21", string(lines[0].Data))
	assert.Equal(t, uint64(21), lines[0].Seq)
}

// A reader that resumes after a Seq beyond the last line of a finished
// process is at the end, not waiting for lines that will never come.
func TestResumeBeyondTheEnd(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "seq 1 10"})
	require.NoError(t, err)
	waitDone(t, p)
	s := p.Subscribe(50)
	defer s.Close()
	lines, missed, ended := s.Read(nil)
	assert.Empty(t, lines)
	assert.Zero(t, missed)
	assert.True(t, ended)
}

func TestRingBoundsAndMissed(t *testing.T) {
	r := newTestRegistry(t, Options{MaxLines: 100})
	p, err := r.Start(executor.Command{Cmd: "seq 1 1000"})
	require.NoError(t, err)
	waitDone(t, p)
	s := p.Subscribe(0)
	defer s.Close()
	lines, missed := readAll(t, s, true)
	assert.Equal(t, uint64(900), missed)
	require.Len(t, lines, 100)
	assert.Equal(t, "901", string(lines[0].Data))
	assert.Equal(t, "1000", string(lines[99].Data))
}

func TestRingByteBound(t *testing.T) {
	rg := newRing(1000, 10*(lineOverhead+10))
	for i := 0; i < 100; i++ {
		rg.push(Line{Data: []byte(strings.Repeat("x", 10))})
	}
	assert.Equal(t, 10, rg.n)
	assert.Equal(t, uint64(91), rg.oldest())
	assert.LessOrEqual(t, rg.bytes, 10*(lineOverhead+10))
	got := rg.appendFrom(nil, 95, 3)
	require.Len(t, got, 3)
	assert.Equal(t, uint64(95), got[0].Seq)
}

// A reader that reads nothing must not hold up the process or another
// reader: the producer never waits on a subscriber.
func TestStalledReaderBlocksNobody(t *testing.T) {
	r := newTestRegistry(t, Options{MaxLines: 1000})
	p, err := r.Start(executor.Command{Cmd: "sleep 0.1; seq 1 200000"})
	require.NoError(t, err)
	stalled := p.Subscribe(0) // never read
	defer stalled.Close()
	active := p.Subscribe(0)
	defer active.Close()
	lines, missed := readAll(t, active, true)
	waitDone(t, p)
	assert.Equal(t, uint64(200000), uint64(len(lines))+missed)
	assert.Equal(t, "200000", string(lines[len(lines)-1].Data))
	// The stalled reader can still catch up with what is retained.
	lines, missed = readAll(t, stalled, true)
	assert.Len(t, lines, 1000)
	assert.Equal(t, uint64(199000), missed)
}

func TestManyReadersSeeSameSequence(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "seq 1 5000"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make([][]Line, 20)
	errs := make([]error, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := p.Subscribe(0)
			defer s.Close()
			results[i], _, errs[i] = followToEnd(t.Context(), s, true)
		}()
	}
	wg.Wait()
	for i, lines := range results {
		require.NoError(t, errs[i], "reader %d", i)
		require.Len(t, lines, 5000)
		for j, l := range lines {
			if uint64(j+1) != l.Seq || strconv.Itoa(j+1) != string(l.Data) {
				t.Fatalf("line %d: seq %d data %q", j, l.Seq, l.Data)
			}
		}
	}
}

func TestFollowFalseReturnsAtOnce(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "echo one; sleep 100"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.ring.n == 1 }, 5*time.Second, time.Millisecond)
	s := p.Subscribe(0)
	defer s.Close()
	lines, _ := readAll(t, s, false)
	require.Len(t, lines, 1)
	assert.Equal(t, "one", string(lines[0].Data))
}

func TestSubscriptionCloseRemovesAtOnceAndCtxEndsWait(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	s := p.Subscribe(0)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = s.Next(ctx, nil, true)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	s.Close()
	s.Close()
	p.mu.Lock()
	assert.Empty(t, p.subs)
	p.mu.Unlock()
}

func TestFinishedBounds(t *testing.T) {
	// Each process holds 10 lines of 5 bytes in one chunk of slots.
	r := newTestRegistry(t, Options{MaxFinished: 3, MaxFinishedBytes: 2 * (10*5 + chunkLines*lineOverhead)})
	var ps []*Process
	for i := 0; i < 5; i++ {
		p, err := r.Start(executor.Command{Cmd: "for i in 1 2 3 4 5 6 7 8 9 10; do echo abcde; done"})
		require.NoError(t, err)
		waitDone(t, p)
		ps = append(ps, p)
		// retire runs right after Done; wait until it has taken p.
		require.Eventually(t, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			last, ok := r.finished.Last()
			return ok && last == p
		}, 5*time.Second, time.Millisecond)
	}
	infos := r.List()
	require.Len(t, infos, 3, "only the 3 most recently finished stay listed")
	assert.Equal(t, ps[2].ID, infos[0].ID)
	_, err := r.Get(ps[0].ID)
	assert.ErrorIs(t, err, ErrNotFound)
	// Only two processes' lines fit the budget: the oldest listed lost them.
	assert.Zero(t, ps[2].logBytes())
	assert.NotZero(t, ps[3].logBytes())
	assert.NotZero(t, ps[4].logBytes())
	s := ps[2].Subscribe(0)
	defer s.Close()
	lines, missed := readAll(t, s, true)
	assert.Empty(t, lines)
	assert.Equal(t, uint64(10), missed)
}

func TestCloseKillsRunningGroups(t *testing.T) {
	r := NewRegistry(&executor.Runner{}, Options{})
	_, grandchild := startWithGrandchild(t, r)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.Close(ctx))
	require.Eventually(t, func() bool { return !testutil.Alive(grandchild) }, 5*time.Second, 10*time.Millisecond)
	_, err := r.Start(executor.Command{Cmd: "true"})
	assert.ErrorIs(t, err, ErrClosed)
}
