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

	// A request's own user, for one command.
	c := sh(`id -u; echo "$USER $HOME"`)
	c.User, err = runner.LookupUser("root")
	require.NoError(t, err)
	assert.Equal(t, "0\nroot /root\n", string(run(t, r, runner, "n", c).Stdout))
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
