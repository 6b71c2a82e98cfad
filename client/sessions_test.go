package client_test

import (
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

func TestSessions(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	s, created, err := a.c.CreateSession(ctx, client.SessionConfig{ID: "thread-1", TempWorkdir: true,
		Env: map[string]string{"STAGE": "test"}, IdleTimeout: time.Hour, Timeout: time.Minute})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "thread-1", s.ID)
	assert.NotEmpty(t, s.User)
	require.DirExists(t, s.Cwd)

	again, created, err := a.c.CreateSession(ctx, client.SessionConfig{ID: "thread-1", Reuse: true})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, s.Cwd, again.Cwd)
	_, _, err = a.c.CreateSession(ctx, client.SessionConfig{ID: "thread-1"})
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusConflict, apiErr.StatusCode)

	in := func(cmd string) client.Command { return client.Command{Cmd: cmd, Session: "thread-1"} }
	res, err := a.c.Run(ctx, in("mkdir app && cd app && export BUILT=yes"))
	require.NoError(t, err)
	require.Equal(t, 0, res.Code, res.Stderr)
	var lines []string
	for ev, err := range a.c.RunStream(ctx, in(`echo "$PWD $BUILT $STAGE"; cd ..`)) {
		require.NoError(t, err)
		if ev.Type == client.EventOutput {
			lines = append(lines, string(ev.Data))
		}
	}
	assert.Equal(t, []string{s.Cwd + "/app yes test"}, lines)
	res, err = a.c.Run(ctx, in("pwd"))
	require.NoError(t, err)
	assert.Equal(t, s.Cwd+"\n", res.Stdout)

	p, err := a.c.StartProcess(ctx, in("sleep 300"))
	require.NoError(t, err)
	list, err := a.c.ListSessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "thread-1", list[0].ID)
	assert.Equal(t, 1, list[0].Running)
	assert.False(t, list[0].CreatedAt.IsZero())
	assert.False(t, list[0].LastUsedAt.Before(list[0].CreatedAt))

	require.NoError(t, a.c.DeleteSession(ctx, "thread-1"))
	assert.NoDirExists(t, s.Cwd)
	// Killed with the session; its status follows once the agent has
	// stored its end.
	require.Eventually(t, func() bool {
		procs, err := a.c.ListProcesses(ctx)
		require.NoError(t, err)
		require.Len(t, procs, 1)
		assert.Equal(t, p.ID, procs[0].ID)
		return procs[0].Status != client.StatusRunning
	}, 10*time.Second, 10*time.Millisecond)

	_, err = a.c.Run(ctx, in("true"))
	assert.ErrorIs(t, err, client.ErrSessionNotFound)
	assert.ErrorIs(t, a.c.DeleteSession(ctx, "thread-1"), client.ErrSessionNotFound)
	assert.False(t, errors.Is(err, client.ErrProcessNotFound))
	list, err = a.c.ListSessions(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestCommandUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run commands as another user")
	}
	a := startAgent(t, agentConfig{})
	res, err := a.c.Run(t.Context(), client.Command{Cmd: "id -un", User: "nobody", Cwd: "/"})
	require.NoError(t, err)
	assert.Equal(t, "nobody\n", res.Stdout)
}
