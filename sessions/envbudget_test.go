package sessions

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Session environments used to add up without a bound (1,000 sessions
// of 1.85 MB: 1.85 GB). They are now under one budget: a session whose
// environment does not fit is refused, naming the budget and its size; a
// command whose state would pass it is not committed, and Finish says so;
// a deleted session gives its bytes back, and the budget takes as much
// again.
func TestEnvBudget(t *testing.T) {
	runner := &executor.Runner{DrainDelay: 200 * time.Millisecond, Env: []string{"PATH=" + os.Getenv("PATH")}}
	dir := t.TempDir()
	const budget = 1 << 20
	r, err := NewRegistry(runner, Options{StateDir: dir, WorkdirParent: dir, MaxEnvBytes: budget})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Close(ctx))
		runner.KillAll()
	})
	base := envSize(runner.Environ())
	big := strings.Repeat("x", 100<<10) // each session: this, its name, and PATH
	each := base + int64(len("BIG=")+len(big)) + envEntryOverhead
	fits := int(budget / each)
	require.Greater(t, fits, 2)

	fill := func() {
		t.Helper()
		for i := range fits {
			create(t, r, Config{ID: "s" + string(rune('a'+i)), Env: map[string]string{"BIG": big}})
		}
		assert.Equal(t, int64(fits)*each, r.EnvBytes())
		_, _, err := r.Create(Config{ID: "over", Env: map[string]string{"BIG": big}})
		assert.ErrorIs(t, err, ErrEnvBudget)
		assert.Contains(t, err.Error(), "session environment budget exhausted: sessions hold ")
		assert.Contains(t, err.Error(), "past the session environment budget of 1048576 bytes")
		assert.Equal(t, int64(fits)*each, r.EnvBytes(), "a refused session takes nothing")
	}
	fill()

	// A command whose state would pass the budget is not committed.
	dir = t.TempDir()
	require.Less(t, budget-r.EnvBytes(), int64(len(big)), "the state below does not fit")
	call, err := r.Call("sa", sh(`cd `+dir+` && export MORE="$BIG"`))
	require.NoError(t, err)
	out, err := runner.Run(t.Context(), call.Command)
	require.NoError(t, err)
	require.Equal(t, 0, out.Code, string(out.Stderr))
	err = call.Finish(&out.Result)
	assert.ErrorIs(t, err, ErrEnvBudget)
	assert.Contains(t, err.Error(), "the session's state was not saved: session environment budget exhausted: ")
	assert.Equal(t, "none\n", stdout(t, r, runner, "sa", `echo "${MORE:-none}"`))
	assert.NotEqual(t, dir+"\n", stdout(t, r, runner, "sa", "pwd"), "nor its cwd")
	// A state that shrinks is committed, and gives bytes back.
	before := r.EnvBytes()
	stdout(t, r, runner, "sa", "unset BIG")
	assert.Less(t, r.EnvBytes(), before-int64(len(big)))

	for i := range fits {
		require.NoError(t, r.Delete(t.Context(), "s"+string(rune('a'+i))))
	}
	assert.Equal(t, int64(0), r.EnvBytes(), "deleted sessions gave their bytes back")
	fill() // and the budget takes as much again
	assert.Equal(t, int64(defaultMaxEnvBytes), (&Registry{envs: envBudget{max: defaultMaxEnvBytes}}).EnvBudget())
}
