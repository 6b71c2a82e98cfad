package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// makeTree writes n files of a few lines each under root, 100 to a
// directory, plus a link and a binary file.
func makeTree(t *testing.T, root string, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%03d/f%05d.txt", i/100, i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, "file %d\nline two\nline three\n", i), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "bin.dat"), []byte{0, 1, 2, 3, 0, 'x'}, 0o644))
	require.NoError(t, os.Symlink("d000/f00000.txt", filepath.Join(root, "link")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "node_modules/pkg"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "node_modules/pkg/index.js"), []byte("x"), 0o644))
}

// sums is `sha256sum` and `stat` of every file under root but the
// excluded: a tree's identity by content and mode.
func sums(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", `set -e
		find . -path ./node_modules -prune -o -type f -print0 | sort -z | xargs -0 sha256sum
		find . -path ./node_modules -prune -o \( -type f -o -type d \) -printf '%m %p\n' | sort
		find . -path ./node_modules -prune -o -type l -printf '%p -> %l\n' | sort`)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

func openStore(t *testing.T, dir string, budget int64) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Budget: budget, BudgetText: fmt.Sprint(budget)})
	require.NoError(t, err)
	return s
}

// TestCheckpointChangesRestore is the proof: a tree of 10,000
// files, checkpointed, then 10 changed, 5 added, 3 deleted, 1 chmodded:
// changes names exactly those; the diff turns a copy of the original
// into the new tree with patch -p1; restore gives back the original by
// sha256sum and modes; and an agent restarted on the same state
// directory keeps the checkpoint.
func TestCheckpointChangesRestore(t *testing.T) {
	ctx := context.Background()
	root, state, scratch := t.TempDir(), t.TempDir(), t.TempDir()
	makeTree(t, root, 10_000)
	original := sums(t, root)
	s := openStore(t, state, 0)
	m, err := s.Create(ctx, root, "before", nil)
	require.NoError(t, err)
	assert.Equal(t, 10_001, m.summary().Files, "every regular file, the link and node_modules not among them")
	require.NoError(t, exec.Command("cp", "-a", root, filepath.Join(scratch, "orig")).Run())

	var modified, added, deleted []string
	for i := range 10 {
		rel := fmt.Sprintf("d%03d/f%05d.txt", i*7, i*700)
		modified = append(modified, rel)
		require.NoError(t, os.WriteFile(filepath.Join(root, rel), fmt.Appendf(nil, "file %d\nline 2 changed\nline three\n", i*700), 0o644))
	}
	for i := range 5 {
		rel := fmt.Sprintf("new/n%d.txt", i)
		added = append(added, rel)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "new"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, rel), fmt.Appendf(nil, "new %d\n", i), 0o644))
	}
	for i := range 3 {
		rel := fmt.Sprintf("d099/f%05d.txt", 9990+i)
		deleted = append(deleted, rel)
		require.NoError(t, os.Remove(filepath.Join(root, rel)))
	}
	require.NoError(t, os.Chmod(filepath.Join(root, "d050/f05000.txt"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "node_modules/pkg/index.js"), []byte("changed"), 0o644))
	changed := sums(t, root)

	s = openStore(t, state, 0) // a restarted agent
	head, err := s.Get("HEAD", root)
	require.NoError(t, err)
	assert.Equal(t, m.ID, head.ID)
	ch, err := s.Changes(ctx, head, true)
	require.NoError(t, err)
	assert.Equal(t, modified, ch.Modified)
	assert.Equal(t, added, ch.Added)
	assert.Equal(t, deleted, ch.Deleted)
	assert.Equal(t, []string{"d050/f05000.txt"}, ch.ModeChanged)
	assert.False(t, ch.DiffTruncated)

	// The diff turns the original into the new tree (contents: a diff
	// carries no modes).
	cmd := exec.Command("patch", "-p1", "-s", "-E")
	cmd.Dir = filepath.Join(scratch, "orig")
	cmd.Stdin = strings.NewReader(ch.Diff)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, os.Chmod(filepath.Join(scratch, "orig/d050/f05000.txt"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "orig/node_modules/pkg/index.js"), []byte("changed"), 0o644))
	assert.Equal(t, changed, sums(t, filepath.Join(scratch, "orig")))

	res, err := s.Restore(ctx, head, true)
	require.NoError(t, err)
	assert.Equal(t, append(append([]string{}, modified...), deleted...), sortedCopy(res.Restored))
	assert.Equal(t, added, res.Deleted)
	assert.Equal(t, []string{"d050/f05000.txt"}, res.ModeChanged)
	assert.Equal(t, original, sums(t, root))
	assert.NoDirExists(t, filepath.Join(root, "new"), "a directory added since is removed once emptied")

	ch, err = s.Changes(ctx, head, false)
	require.NoError(t, err)
	assert.Empty(t, ch.Added)
	assert.Empty(t, ch.Modified)
	assert.Empty(t, ch.Deleted)
	assert.Empty(t, ch.ModeChanged)
}

func sortedCopy(s []string) []string {
	c := append([]string{}, s...)
	sortStrings(c)
	return c
}

// TestCheckpointDedupAndBudget: a second checkpoint of an unchanged tree
// stores nothing new; past the budget a checkpoint is refused and leaves
// nothing; deleting frees what no other checkpoint uses.
func TestCheckpointDedupAndBudget(t *testing.T) {
	ctx := context.Background()
	root, state := t.TempDir(), t.TempDir()
	makeTree(t, root, 200)
	s := openStore(t, state, 64<<10)
	first, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	assert.Positive(t, first.Bytes)
	stored := s.Stored()
	second, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(0), second.Bytes)
	assert.Equal(t, stored, s.Stored())

	require.NoError(t, os.WriteFile(filepath.Join(root, "big"), make([]byte, 100<<10), 0o644))
	_, err = s.Create(ctx, root, "", nil)
	require.ErrorIs(t, err, ErrBudget)
	assert.Contains(t, err.Error(), "checkpoint budget 65536 (-checkpoint-budget)")
	assert.Equal(t, stored, s.Stored())
	assert.Len(t, s.List(), 2)
	tmp, _ := os.ReadDir(filepath.Join(state, "checkpoints/tmp"))
	assert.Empty(t, tmp)

	freed, err := s.Delete(first.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(0), freed, "the second checkpoint still uses every content")
	freed, err = s.Delete(second.ID)
	require.NoError(t, err)
	assert.Equal(t, stored, freed)
	assert.Equal(t, int64(0), s.Stored())
	_, err = s.Get("HEAD", root)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Delete(second.ID)
	assert.ErrorIs(t, err, ErrNotFound)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestObjectDirsOnDemand: Open makes no object directories (an agent
// that makes no checkpoint never pays for them, nor walks them at its next
// start), and with packs a checkpoint makes none either, on both of the
// store's ways of copying (in one read within the budget, hashed first
// near it); it restores.
func TestObjectDirsOnDemand(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"one read", 0}, {"hashed first", 50 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			root, state := t.TempDir(), t.TempDir()
			same := bytes.Repeat([]byte("x"), 10<<10)
			for i := range 10 { // 100 KiB to read, over the budget; 10 KiB new, within it
				require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("same%d", i)), same, 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(root, "other"), []byte("other"), 0o644))
			s := openStore(t, state, tc.budget)
			objects := filepath.Join(state, "checkpoints/objects")
			objectDirs := func() []os.DirEntry {
				ents, err := os.ReadDir(objects)
				if os.IsNotExist(err) {
					return nil
				}
				require.NoError(t, err)
				return ents
			}
			assert.Empty(t, objectDirs())

			m, err := s.Create(ctx, root, "", nil)
			require.NoError(t, err)
			assert.Empty(t, objectDirs(), "new content goes to packs")

			before := sums(t, root)
			require.NoError(t, os.Remove(filepath.Join(root, "same3")))
			_, err = s.Restore(ctx, m, false)
			require.NoError(t, err)
			assert.Equal(t, before, sums(t, root))
		})
	}
}
