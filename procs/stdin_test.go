package procs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func TestWriteStdinPassesThroughAndNamesTheStatus(t *testing.T) {
	r := newTestRegistry(t, Options{})
	p, err := r.Start(executor.Command{Cmd: "cat", Input: "a\n", Stdin: true})
	require.NoError(t, err)
	n, err := p.WriteStdin(t.Context(), strings.NewReader("b\n"), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	require.NoError(t, p.CloseStdin())
	<-p.Done()
	assert.Equal(t, StatusCompleted, p.Info().Status)

	_, err = p.WriteStdin(t.Context(), strings.NewReader("c\n"), 0)
	assert.ErrorIs(t, err, ErrNotRunning)
	assert.EqualError(t, err, "process is not running (status: completed)")
	assert.NoError(t, p.CloseStdin())

	q, err := r.Start(executor.Command{Cmd: "true"})
	require.NoError(t, err)
	_, err = q.WriteStdin(t.Context(), strings.NewReader("x"), 0)
	assert.ErrorIs(t, err, executor.ErrNoStdin)
	assert.ErrorIs(t, q.CloseStdin(), executor.ErrNoStdin)
}
