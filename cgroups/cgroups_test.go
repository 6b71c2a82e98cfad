package cgroups

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTree is a cgroup directory in a temporary directory: Mkdir makes the
// interface files a real cgroupfs shows in a new leaf, and Remove removes
// them with it, as rmdir does in cgroupfs.
type fakeTree struct{ Dir }

func (f fakeTree) Mkdir(name string) error {
	if err := f.Dir.Mkdir(name); err != nil {
		return err
	}
	for _, file := range []string{"memory.max", "memory.swap.max", "memory.oom.group", "pids.max", "cgroup.kill"} {
		if err := os.WriteFile(f.Path(name+"/"+file), nil, 0o644); err != nil {
			return err
		}
	}
	_ = os.WriteFile(f.Path(name+"/memory.events"), []byte("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"), 0o644)
	_ = os.WriteFile(f.Path(name+"/pids.events"), []byte("max 0\n"), 0o644)
	return nil
}

func (f fakeTree) Remove(name string) error { return os.RemoveAll(f.Path(name)) }

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestLeaf(t *testing.T) {
	root := t.TempDir()
	m := New(fakeTree{Dir(root)})
	l, err := m.NewLeaf(Limits{MemoryBytes: 64 << 20, Pids: 32})
	require.NoError(t, err)
	assert.Equal(t, root, filepath.Dir(l.Path()))
	assert.Equal(t, "67108864", read(t, l.Path()+"/memory.max"))
	assert.Equal(t, "0", read(t, l.Path()+"/memory.swap.max"))
	assert.Equal(t, "1", read(t, l.Path()+"/memory.oom.group"))
	assert.Equal(t, "32", read(t, l.Path()+"/pids.max"))
	assert.Equal(t, Events{}, l.Events())

	// The kernel counts an OOM kill and two refused forks.
	require.NoError(t, os.WriteFile(l.Path()+"/memory.events", []byte("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 1\n"), 0o644))
	require.NoError(t, os.WriteFile(l.Path()+"/pids.events", []byte("max 2\n"), 0o644))
	assert.Equal(t, Events{OOMKills: 1, PidsMax: 2}, l.Events())

	require.NoError(t, l.Remove())
	_, err = os.Stat(l.Path())
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestLeafOnlyWhatIsAsked(t *testing.T) {
	m := New(fakeTree{Dir(t.TempDir())})
	a, err := m.NewLeaf(Limits{Pids: 5})
	require.NoError(t, err)
	b, err := m.NewLeaf(Limits{MemoryBytes: 1 << 20})
	require.NoError(t, err)
	assert.NotEqual(t, a.Path(), b.Path(), "each command has a leaf of its own")
	assert.Equal(t, "", read(t, a.Path()+"/memory.max"))
	assert.Equal(t, "", read(t, b.Path()+"/pids.max"))
	require.NoError(t, a.Remove())
	require.NoError(t, b.Remove())
}

func TestLeafFailsWhole(t *testing.T) {
	// A tree without a pids controller: the leaf is refused and removed.
	root := t.TempDir()
	m := New(Dir(root)) // the plain directory: no interface files appear
	_, err := m.NewLeaf(Limits{Pids: 5})
	require.Error(t, err)
	entries, _ := os.ReadDir(root)
	assert.Empty(t, entries)
}

func TestEnable(t *testing.T) {
	dir := Dir(t.TempDir())
	require.NoError(t, os.WriteFile(dir.Path("cgroup.controllers"), []byte("cpu io memory\n"), 0o644))
	require.NoError(t, os.WriteFile(dir.Path("cgroup.subtree_control"), nil, 0o644))
	assert.ErrorContains(t, enable(dir), "the pids controller is not available")

	require.NoError(t, os.WriteFile(dir.Path("cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644))
	require.NoError(t, os.WriteFile(dir.Path("cgroup.subtree_control"), []byte("memory pids\n"), 0o644))
	assert.NoError(t, enable(dir), "already enabled: nothing to move")
	_, err := os.Stat(dir.Path(agentLeaf))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestField(t *testing.T) {
	b := []byte("low 0\nmax 7\noom_kill 3\n")
	assert.Equal(t, uint64(3), field(b, "oom_kill"))
	assert.Equal(t, uint64(7), field(b, "max"))
	assert.Equal(t, uint64(0), field(b, "oom"))
}
