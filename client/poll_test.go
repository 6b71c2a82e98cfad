package client_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

func TestPollProcess(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: `read name; echo "hi $name"; echo bye >&2`, Stdin: true})
	require.NoError(t, err)
	r, err := a.c.PollProcess(ctx, p.ID, client.PollOptions{Input: "you\n", YieldMS: 10000})
	require.NoError(t, err)
	assert.Equal(t, client.StatusCompleted, r.Status)
	assert.Equal(t, "hi you\n", r.Stdout)
	assert.Equal(t, "bye\n", r.Stderr)
	assert.Equal(t, int64(11), r.Cursor)
	assert.Zero(t, r.Missed, "kept from before the input")
	require.NotNil(t, r.ExitCode)
	assert.Equal(t, 0, *r.ExitCode)
	assert.Equal(t, &client.Termination{Reason: "exit"}, r.Termination)

	zero := int64(0)
	r, err = a.c.PollProcess(ctx, p.ID, client.PollOptions{Cursor: &zero})
	require.NoError(t, err)
	assert.Equal(t, "hi you\n", r.Stdout)
	r, err = a.c.PollProcess(ctx, p.ID, client.PollOptions{})
	require.NoError(t, err)
	assert.Empty(t, r.Stdout+r.Stderr, "nothing after the last reply")

	_, err = a.c.PollProcess(ctx, "nope", client.PollOptions{})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusNotFound, e.StatusCode)
}
