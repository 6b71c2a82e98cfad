package executor

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// lineCounter checks that a command's stdout lines are 1, 2, 3, ... as
// seq prints them, as a LineFunc.
type lineCounter struct {
	mu    sync.Mutex
	next  int // the line expected next, counting from 1
	bad   string
	delay time.Duration // slept in every call, as a slow consumer would
}

func (c *lineCounter) add(s Stream, _ time.Time, lines [][]byte) {
	time.Sleep(c.delay)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range lines {
		if c.bad != "" {
			return
		}
		if s != Stdout || string(l) != strconv.Itoa(c.next+1) {
			c.bad = s.String() + ": " + string(l) + " after " + strconv.Itoa(c.next)
			return
		}
		c.next++
	}
}

func (c *lineCounter) count() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next, c.bad
}

// Output the command wrote before its shell exited is delivered, however
// long the consumer takes: the drain after exit counts only time spent
// waiting on an empty pipe. Before, a consumer slower than DrainDelay lost
// the pipe's last 64 KiB and the result said nothing.
func TestSlowConsumerLosesNothing(t *testing.T) {
	r := Runner{DrainDelay: 50 * time.Millisecond}
	c := &lineCounter{delay: 100 * time.Millisecond}
	p, err := r.Start(t.Context(), Command{Cmd: "seq 1 100000"}, c.add)
	require.NoError(t, err)
	res := p.Wait()
	n, bad := c.count()
	assert.Empty(t, bad)
	assert.Equal(t, 100000, n)
	assert.Equal(t, 0, res.Code)
	assert.False(t, res.Truncated)
}

// A background child that writes forever (`yes &`) cannot keep a command
// from finishing: its output is cut DrainDelay after the shell exits, the
// result says so, and the writer dies of SIGPIPE once the pipe is closed.
func TestBackgroundWriterForeverIsCut(t *testing.T) {
	r := Runner{DrainDelay: 200 * time.Millisecond}
	var c collector
	p, err := r.Start(t.Context(), Command{Cmd: "yes >&2 & echo $!"}, func(s Stream, at time.Time, lines [][]byte) {
		if s == Stdout {
			c.add(s, at, lines)
		}
	})
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end: a background writer held it")
	}
	res := p.Wait()
	assert.Equal(t, 0, res.Code)
	assert.True(t, res.Truncated, "output was cut and the result does not say so")
	lines := c.get(Stdout)
	require.Len(t, lines, 1)
	pid, err := strconv.Atoi(lines[0])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 10*time.Second, 10*time.Millisecond,
		"yes %d survived its pipe", pid)
}
