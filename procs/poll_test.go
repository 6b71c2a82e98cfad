package procs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// TestForget drops ended processes whether or not their watch has retired
// them yet: they are not listed, and hold nothing of the log budget.
func TestForget(t *testing.T) {
	r := newTestRegistry(t, Options{})
	for i := 0; i < 20; i++ {
		p, err := r.StartWith(executor.Command{Cmd: "echo hi"}, StartOptions{Polled: true})
		require.NoError(t, err)
		<-p.Done()
		o, err := p.ReadOutput(nil, 1<<10, 0)
		require.NoError(t, err)
		assert.Equal(t, "hi\n", string(o.Stdout))
		r.Forget(p.ID)
		_, err = r.Get(p.ID)
		assert.ErrorIs(t, err, ErrNotFound)
	}
	require.Eventually(t, func() bool {
		st := r.Stats()
		return st.Running == 0 && st.Finished == 0 && st.LogBytes == 0
	}, 5*time.Second, 5*time.Millisecond, "%+v", r.Stats())
	assert.Empty(t, r.List())
}

// TestReadOutputKeepsFromFirstPoll: a process not started polled keeps its
// output from its first poll on; what came before is missed, and counted.
func TestReadOutputKeepsFromFirstPoll(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "echo before; read x; echo after", Stdin: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.lockedEnd() == 7 }, 5*time.Second, time.Millisecond)
	o, err := p.ReadOutput(nil, 1<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(7), o.Missed)
	assert.Empty(t, o.Stdout)
	require.NoError(t, p.CloseStdin())
	<-p.Done()
	o, err = p.ReadOutput(nil, 1<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, "after\n", string(o.Stdout))
	assert.Equal(t, int64(13), o.Cursor)
	assert.Equal(t, &executor.Termination{Reason: executor.ReasonExit}, o.Termination)
}

// lockedEnd returns how many bytes p has written, under its lock.
func (p *Process) lockedEnd() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.end
}
