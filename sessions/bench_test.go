package sessions

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// BenchmarkCallFinish measures the agent's own part of a session command:
// the state file, the environment handed over, the parse and the commit.
// The shell's part is left out: the state is the one a shell wrote once.
func BenchmarkCallFinish(b *testing.B) {
	dir := b.TempDir()
	r, err := NewRegistry(&executor.Runner{}, Options{StateDir: "/dev/shm", WorkdirParent: dir})
	require.NoError(b, err)
	defer r.Close(b.Context())
	r.sourceOnce.Do(func() { r.sourceKind = sourceMissing })
	_, _, err = r.Create(Config{ID: "b"})
	require.NoError(b, err)
	probe := dir + "/state"
	require.NoError(b, os.WriteFile(probe, nil, 0o600))
	require.NoError(b, exec.Command("/bin/sh", "-c", wrap("true", probe, sourceMissing)).Run())
	state, err := os.ReadFile(probe)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		call, err := r.Call("b", executor.Command{Cmd: "true"})
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(call.state.path, state, 0); err != nil {
			b.Fatal(err)
		}
		call.Finish(&executor.Result{})
	}
}
