package executor

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBaseEnvReplacesRunnerEnv(t *testing.T) {
	r := &Runner{Env: []string{"FROM_RUNNER=1", "PATH=" + os.Getenv("PATH")}}
	out, err := r.Run(t.Context(), Command{Cmd: `echo "${FROM_RUNNER:-none} $A $B"`})
	require.NoError(t, err)
	assert.Equal(t, "1  \n", string(out.Stdout))
	c := Command{Cmd: `echo "${FROM_RUNNER:-none} $A $B"`, BaseEnv: []string{"A=base", "B=base"}, Env: map[string]string{"B=": "x"}}
	_, err = r.Run(t.Context(), c)
	assert.ErrorIs(t, err, ErrInvalidCommand, "Env is still checked")
	c.Env = map[string]string{"B": "over"}
	out, err = r.Run(t.Context(), c)
	require.NoError(t, err)
	assert.Equal(t, "none base over\n", string(out.Stdout))
}

func TestOnStart(t *testing.T) {
	r := &Runner{}
	var got *Process
	out, err := r.Run(t.Context(), Command{Cmd: "echo $$", OnStart: func(p *Process) { got = p }})
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, string(out.Stdout), strconv.Itoa(got.Pid())+"\n")
}

func TestUserCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run commands as another user")
	}
	r := &Runner{}
	u, err := r.LookupUser("nobody")
	require.NoError(t, err)
	assert.Equal(t, "nobody", u.Name)
	assert.Equal(t, uint32(65534), u.UID)
	assert.Contains(t, u.Groups, u.GID)
	out, err := r.Run(t.Context(), Command{Cmd: "id -u; id -g; id -G", User: u})
	require.NoError(t, err)
	assert.Equal(t, "65534\n65534\n65534\n", string(out.Stdout))
}
