package executor

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A background process's input used to be held until read, without a
// bound (12 × 60 MB: 1.5 GB of RSS). The inputs not yet read are now
// under one budget: past it a start is refused, naming the budget and its
// size, and an input gives its bytes back once written, or when its
// command ends without reading it. Each input here is larger than the
// stdin pipe (1 MiB), so that a command that does not read holds most of
// it in the agent.
func TestInputBudget(t *testing.T) {
	const size = 3 << 20
	r := &Runner{MaxInput: 8 << 20, DrainDelay: 100 * time.Millisecond}
	input := strings.Repeat("x", size)
	noLines := func(Stream, time.Time, [][]byte) {}
	start := func() (*Process, error) {
		return r.Start(t.Context(), Command{Cmd: "sleep 100", Input: input}, noLines)
	}
	fill := func() []*Process {
		t.Helper()
		var ps []*Process
		for range 2 {
			p, err := start()
			require.NoError(t, err)
			ps = append(ps, p)
		}
		assert.Equal(t, int64(2*size), r.InputHeld())
		_, err := start()
		assert.ErrorIs(t, err, ErrInputBudget)
		assert.EqualError(t, err, "input budget exhausted: commands have not yet read 6291456 bytes of input, and this command's 3145728 more would pass the input budget of 8388608 bytes; retry once they have")
		_, err = r.Run(t.Context(), Command{Cmd: "true", Input: input})
		assert.ErrorIs(t, err, ErrInputBudget, "Run counts too")
		return ps
	}
	ps := fill()
	// A command that reads its input gives it back as soon as it has.
	out, err := r.Run(t.Context(), Command{Cmd: "wc -c", Input: strings.Repeat("y", 2<<20)})
	require.NoError(t, err)
	assert.Equal(t, "2097152\n", string(out.Stdout))
	assert.Equal(t, int64(2*size), r.InputHeld())

	for _, p := range ps {
		require.NoError(t, p.Kill())
		p.Wait()
	}
	require.Eventually(t, func() bool { return r.InputHeld() == 0 }, 5*time.Second, 5*time.Millisecond,
		"the killed commands' inputs were given back")
	ps = fill() // and the budget takes as much again
	for _, p := range ps {
		require.NoError(t, p.Kill())
		p.Wait()
	}
	assert.Equal(t, int64(0), r.InputHeld())
	assert.Equal(t, int64(256<<20), (&Runner{}).InputBudget())
}
