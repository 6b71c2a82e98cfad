package procs

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func TestMaxRunning(t *testing.T) {
	r := newTestRegistry(t, Options{MaxRunning: 2})
	a, err := r.Start(executor.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	_, err = r.Start(executor.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	_, err = r.Start(executor.Command{Cmd: "true"})
	assert.ErrorIs(t, err, ErrTooMany)
	assert.EqualError(t, err, "too many running background processes (limit 2)")
	assert.Len(t, r.List(), 2, "a refused process is not listed")

	// A finished process frees its place.
	_, err = r.Kill(t.Context(), a.ID, syscall.SIGKILL)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := r.Start(executor.Command{Cmd: "sleep 100"})
		return err == nil && p != nil
	}, 5*time.Second, 10*time.Millisecond)
}

func TestDefaultMaxRunning(t *testing.T) {
	n := Options{}.maxRunning()
	assert.Positive(t, n)
	assert.LessOrEqual(t, n, 1000)
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	assert.LessOrEqual(t, uint64(3*n), lim.Cur, "three descriptors each fit the limit")
}
