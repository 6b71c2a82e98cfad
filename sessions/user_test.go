package sessions

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// As root, a session of user nobody runs its commands as nobody, with
// nobody's groups and passwd entry, in a temp workdir nobody owns, and its
// state still commits.
func TestUserNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run commands as another user")
	}
	r, runner := newTestRegistry(t)
	nobody, err := runner.LookupUser("nobody")
	require.NoError(t, err)
	byUID, err := runner.LookupUser("65534")
	require.NoError(t, err)
	assert.Equal(t, nobody, byUID)

	s := create(t, r, Config{ID: "n", User: nobody, TempWorkdir: true})
	assert.Equal(t, "nobody", s.Info().User)
	workdir := s.Info().Cwd
	fi, err := os.Stat(workdir)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Equal(t, uint32(65534), st.Uid, "the workdir is nobody's")
	assert.Equal(t, os.ModeDir|0o700, fi.Mode())

	assert.Equal(t, "65534\n", stdout(t, r, runner, "n", "id -u"))
	assert.Equal(t, "65534\n", stdout(t, r, runner, "n", "id -g"))
	assert.Equal(t, "/nonexistent nobody nobody "+workdir+"\n", stdout(t, r, runner, "n", `echo "$HOME $USER $LOGNAME $PWD"`))
	stdout(t, r, runner, "n", "mkdir sub && cd sub && export MINE=1 && touch f")
	assert.Equal(t, workdir+"/sub 1\n", stdout(t, r, runner, "n", `echo "$PWD $MINE"`))
	out := run(t, r, runner, "n", sh("touch /root/nope"))
	assert.NotEqual(t, 0, out.Code, "nobody may not write there")

	// A request's own user must be the session's (see
	// TestUserMismatchRefused); the same user is fine.
	c := sh(`id -u; echo "$USER $HOME"`)
	c.User, err = runner.LookupUser("root")
	require.NoError(t, err)
	_, err = r.Call("n", c)
	assert.ErrorIs(t, err, ErrUserMismatch)
	c.User = nobody
	assert.Equal(t, "65534\nnobody /nonexistent\n", string(run(t, r, runner, "n", c).Stdout))
	assert.Equal(t, "nobody\n", stdout(t, r, runner, "n", `echo "$USER"`))

	// A cwd the user may not enter is the request's fault.
	c = sh("true")
	c.Dir = "/root"
	call, err := r.Call("n", c)
	require.NoError(t, err)
	_, err = runner.Run(t.Context(), call.Command)
	call.Finish(nil)
	assert.ErrorIs(t, err, executor.ErrInvalidDir)
	assert.EqualError(t, err, "cwd is not accessible to user nobody (permission denied): /root")

	_, err = runner.LookupUser("no-such-user-here")
	assert.ErrorIs(t, err, executor.ErrUnknownUser)
	_, err = runner.LookupUser("4000000000")
	assert.ErrorIs(t, err, executor.ErrUnknownUser)
}

// An agent that is not root may not run commands as another user.
func TestUserNotPrivileged(t *testing.T) {
	runner := &executor.Runner{Privileged: func() bool { return false }}
	_, err := runner.LookupUser("nobody")
	assert.ErrorIs(t, err, executor.ErrNotPrivileged)
	_, err = runner.Run(t.Context(), executor.Command{Cmd: "true", User: &executor.User{Name: "nobody", UID: 65534, GID: 65534}})
	assert.ErrorIs(t, err, executor.ErrNotPrivileged)
}

// The attack: nobody exported a PATH with its own bin/id in its session, and
// a user: root /run in that session ran that id as root. A command whose
// own user is not its session's is refused, in either direction, for
// foreground and background commands alike; the state is never used.
func TestUserMismatchRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run commands as another user")
	}
	r, runner := newTestRegistry(t)
	nobody, err := runner.LookupUser("nobody")
	require.NoError(t, err)
	root, err := runner.LookupUser("root")
	require.NoError(t, err)
	s := create(t, r, Config{ID: "n", User: nobody, TempWorkdir: true})
	bin := s.Info().Cwd + "/bin"
	marker := s.Info().Cwd + "/pwned"
	stdout(t, r, runner, "n", `mkdir bin && printf '#!/bin/sh\ntouch `+marker+`\necho uid=0\n' >bin/id && chmod +x bin/id && export PATH="`+bin+`:$PATH"`)
	require.Equal(t, "uid=0\n", stdout(t, r, runner, "n", "id"), "nobody's own id is first in its PATH")
	require.NoError(t, os.Remove(marker))

	c := sh("id")
	c.User = root
	call, err := r.Call("n", c)
	if err == nil { // it would be the attack: run it, to show what it does
		out, err := runner.Run(t.Context(), call.Command)
		require.NoError(t, err)
		call.Finish(&out.Result)
	}
	assert.ErrorIs(t, err, ErrUserMismatch)
	assert.EqualError(t, err, "a session's commands run as the session's user: session n runs as nobody, not as root; create a session for root")
	_, err = r.Background("n", c)
	assert.ErrorIs(t, err, ErrUserMismatch)
	assert.NoFileExists(t, marker, "nobody's id never ran as root")

	create(t, r, Config{ID: "agent"}) // the agent's own user: root
	stdout(t, r, runner, "agent", "export ROOT_ONLY=1")
	c = sh("echo ${ROOT_ONLY:-none}")
	c.User = nobody
	_, err = r.Call("agent", c)
	assert.ErrorIs(t, err, ErrUserMismatch)
	_, err = r.Background("agent", c)
	assert.ErrorIs(t, err, ErrUserMismatch)
	c.User = root // the session's own user, named: allowed
	assert.Equal(t, "1\n", string(run(t, r, runner, "agent", c).Stdout))
}
