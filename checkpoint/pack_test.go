package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// packFiles returns the files of the store's packs directory and their
// total size.
func packFiles(t *testing.T, state string) ([]string, int64) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(state, "checkpoints/packs"))
	require.NoError(t, err)
	var names []string
	var size int64
	for _, e := range ents {
		fi, err := e.Info()
		require.NoError(t, err)
		names = append(names, e.Name())
		size += fi.Size()
	}
	return names, size
}

// TestPackDedupe: identical content, small or past smallMax (streamed
// into the pack, and taken back when another worker stored it first), is
// stored once within a checkpoint, and a second checkpoint of the
// unchanged tree adds no byte and no pack.
func TestPackDedupe(t *testing.T) {
	ctx := context.Background()
	root, state := t.TempDir(), t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), (3*smallMax)/16)
	for i := range 8 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("big%d", i)), big, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("small%d", i)), []byte("same"), 0o644))
	}
	s := openStore(t, state, 0)
	first, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(len(big)+len("same")), first.Bytes)
	assert.Equal(t, first.Bytes, s.Stored())
	names, size := packFiles(t, state)
	assert.Equal(t, size, s.DiskBytes(), "the packs on disk are what the store counts")
	packs := int64(len(names) / 2) // one index each
	assert.Equal(t, packs*int64(len(packMagic))+2*recHeader+first.Bytes, size-idxBytes(t, state, names),
		"the packs hold each content once: the duplicates streamed were taken back")

	second, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(0), second.Bytes)
	again, _ := packFiles(t, state)
	assert.Equal(t, names, again, "no pack for an unchanged tree")

	s = openStore(t, state, 0)
	assert.Equal(t, first.Bytes, s.Stored())
	tmp, _ := os.ReadDir(filepath.Join(state, "checkpoints/tmp"))
	assert.Empty(t, tmp)
}

// idxBytes is the size of the indexes among names.
func idxBytes(t *testing.T, state string, names []string) int64 {
	var n int64
	for _, name := range names {
		if strings.HasSuffix(name, ".idx") {
			fi, err := os.Stat(filepath.Join(state, "checkpoints/packs", name))
			require.NoError(t, err)
			n += fi.Size()
		}
	}
	return n
}

// TestPackDeleteReclaims: deleting a checkpoint gives its content back
// to the budget and its bytes back to the disk: a pack left with nothing
// live is removed, one left less than half live compacted, and what is
// left restores exactly.
func TestPackDeleteReclaims(t *testing.T) {
	ctx := context.Background()
	root, state := t.TempDir(), t.TempDir()
	makeTree(t, root, 500)
	s := openStore(t, state, 0)
	first, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	for i := range 450 { // 50 of the first's contents stay in use
		p := filepath.Join(root, fmt.Sprintf("d%03d/f%05d.txt", i/100, i))
		require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, "changed %d, and longer than it was\n", i), 0o644))
	}
	second, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	want := sums(t, root)
	_, before := packFiles(t, state)

	freed, err := s.Delete(first.ID)
	require.NoError(t, err)
	assert.Positive(t, freed)
	assert.Less(t, freed, first.Bytes, "the 50 unchanged files' content is still used")
	assert.Equal(t, first.Bytes+second.Bytes-freed, s.Stored())
	_, after := packFiles(t, state)
	assert.Equal(t, after, s.DiskBytes())
	assert.Less(t, after, before-freed/2, "the first's pack was compacted: most of what was freed is off the disk")
	s.mu.Lock()
	for name, p := range s.packs {
		assert.GreaterOrEqual(t, 2*p.live, p.size, "pack %s is at least half live", name)
	}
	s.mu.Unlock()

	require.NoError(t, os.RemoveAll(root))
	_, err = s.Restore(ctx, second, true)
	require.NoError(t, err)
	assert.Equal(t, want, sums(t, root), "the content compacted still restores")
	s = openStore(t, state, 0) // and after a restart
	_, err = s.Restore(ctx, second, true)
	require.NoError(t, err)

	freed, err = s.Delete(second.ID)
	require.NoError(t, err)
	assert.Positive(t, freed)
	assert.Equal(t, int64(0), s.Stored())
	names, size := packFiles(t, state)
	assert.Empty(t, names)
	assert.Equal(t, int64(0), size)
}

// TestPackCrashConsistency: what a crash can leave is set right at
// start-up. A half-written pack in tmp/ is removed once stale; a pack
// renamed into packs/ whose checkpoint was never committed, cut short
// and without its index, is freed; a torn index is rebuilt from its
// pack's records; and a pack cut short under a committed checkpoint
// (the disk lost what was synced) makes that checkpoint refuse to
// restore, saying so, until a new checkpoint stores the content again.
func TestPackCrashConsistency(t *testing.T) {
	ctx := context.Background()
	root, other, state := t.TempDir(), t.TempDir(), t.TempDir()
	makeTree(t, root, 300)
	want := sums(t, root)
	s := openStore(t, state, 0)
	kept, err := s.Create(ctx, root, "kept", nil)
	require.NoError(t, err)
	stored := s.Stored()
	keptPacks, _ := packFiles(t, state)

	// A checkpoint that crashed after its pack was renamed: its manifest
	// never written, its index torn, the pack cut in a record.
	makeTree(t, other, 50)
	lost, err := s.Create(ctx, other, "", nil)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(state, "checkpoints/manifests", lost.ID+".json")))
	all, _ := packFiles(t, state)
	for _, name := range all {
		if !slices.Contains(keptPacks, name) {
			p := filepath.Join(state, "checkpoints/packs", name)
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, fi.Size()/2))
		}
	}
	// A half-written pack in tmp/, from long ago.
	half := filepath.Join(state, "checkpoints/tmp", newPackName()+".pack")
	require.NoError(t, os.WriteFile(half, []byte(packMagic+"torn"), 0o600))
	old := time.Now().Add(-2 * staleAge)
	require.NoError(t, os.Chtimes(half, old, old))
	// The kept checkpoint's index torn.
	for _, name := range keptPacks {
		if strings.HasSuffix(name, ".idx") {
			p := filepath.Join(state, "checkpoints/packs", name)
			require.NoError(t, os.Truncate(p, 100))
		}
	}

	s = openStore(t, state, 0)
	assert.Equal(t, stored, s.Stored(), "only the kept checkpoint's content counts")
	names, size := packFiles(t, state)
	assert.Equal(t, keptPacks, names, "the uncommitted pack is gone, the torn index rebuilt")
	assert.Equal(t, size, s.DiskBytes())
	assert.NoFileExists(t, half)
	require.NoError(t, os.RemoveAll(root))
	_, err = s.Restore(ctx, kept, true)
	require.NoError(t, err)
	assert.Equal(t, want, sums(t, root))

	// The kept checkpoint's pack cut short under it.
	for _, name := range keptPacks {
		if strings.HasSuffix(name, ".pack") {
			p := filepath.Join(state, "checkpoints/packs", name)
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, fi.Size()-10))
		}
	}
	s = openStore(t, state, 0)
	assert.Less(t, s.Stored(), stored)
	_, err = s.Restore(ctx, kept, true)
	require.ErrorIs(t, err, ErrDamaged)
	require.NoError(t, os.WriteFile(filepath.Join(root, "d002/f00299.txt"), []byte("edited\n"), 0o644))
	_, err = s.Changes(ctx, kept, true)
	require.ErrorIs(t, err, ErrDamaged, "no diff against content the store lost, as if the file were new")
	ch, err := s.Changes(ctx, kept, false)
	require.NoError(t, err, "the lists need no content")
	assert.Equal(t, []string{"d002/f00299.txt"}, ch.Modified)
	require.NoError(t, os.RemoveAll(root))
	_, err = s.Restore(ctx, kept, true)
	require.ErrorIs(t, err, ErrDamaged, "and a refused restore changed nothing")
	assert.NoDirExists(t, root)
	_, err = s.Restore(ctx, kept, true)
	require.ErrorIs(t, err, ErrDamaged)
	require.NoError(t, os.MkdirAll(root, 0o755))
	makeTree(t, root, 300)
	_, err = s.Create(ctx, root, "", nil) // stores what was lost again
	require.NoError(t, err)
	assert.Equal(t, stored, s.Stored())
	_, err = s.Restore(ctx, kept, true)
	require.NoError(t, err)
}

// TestPackOldLayout: a checkpoint an earlier agent stored one file per
// object (objects/xx/yyyy) still restores, and deleting it removes them.
func TestPackOldLayout(t *testing.T) {
	ctx := context.Background()
	root, state := t.TempDir(), t.TempDir()
	content := []byte("stored the old way\n")
	raw := sha256.Sum256(content)
	sum := hex.EncodeToString(raw[:])
	obj := filepath.Join(state, "checkpoints/objects", sum[:2], sum[2:])
	require.NoError(t, os.MkdirAll(filepath.Dir(obj), 0o700))
	require.NoError(t, os.WriteFile(obj, content, 0o600))
	m := Manifest{ID: "cp-0123456789ab", Seq: 1, Path: root, CreatedAt: now(), RootMode: 0o755,
		Files: []Entry{{Rel: "f.txt", Mode: 0o640, Size: int64(len(content)), MTime: time.Now().UnixNano(), SHA256: sum}}}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(state, "checkpoints/manifests"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(state, "checkpoints/manifests", m.ID+".json"), data, 0o600))

	s := openStore(t, state, 0)
	assert.Equal(t, int64(len(content)), s.Stored())
	got, err := s.Get(m.ID, "")
	require.NoError(t, err)
	_, err = s.Restore(ctx, got, true)
	require.NoError(t, err)
	data, err = os.ReadFile(filepath.Join(root, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, content, data)
	freed, err := s.Delete(m.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(len(content)), freed)
	assert.NoFileExists(t, obj)
}

// TestScanOrder: the scan's files come out sorted by path, as Changes's
// side-by-side walk needs, though each directory is read on its own and
// a name may sort before or after a directory it starts with.
func TestScanOrder(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"a.b", "a-", "a0", "ab/x", "a/c", "a/b.c/d", "a/b/e", "a/b-/f", "z/y/x/w", "!", "~"} {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, nil, 0o644))
	}
	tr, err := openTree(root)
	require.NoError(t, err)
	defer tr.close()
	files, dirs, err := scan(tr, nil)
	require.NoError(t, err)
	var got, gotDirs []string
	for _, f := range files {
		got = append(got, f.Rel)
	}
	for _, d := range dirs {
		gotDirs = append(gotDirs, d.Rel)
	}
	assert.Equal(t, []string{"!", "a-", "a.b", "a/b-/f", "a/b.c/d", "a/b/e", "a/c", "a0", "ab/x", "z/y/x/w", "~"}, got)
	assert.Equal(t, []string{"a", "a/b", "a/b-", "a/b.c", "ab", "z", "z/y", "z/y/x"}, gotDirs)
}

// TestPackBudgetHashFirst: when the files to read could pass the budget
// if all were new, they are hashed first and only the new content is
// copied: 100 files of one content fit a budget a tenth of their sum.
func TestPackBudgetHashFirst(t *testing.T) {
	ctx := context.Background()
	root, state := t.TempDir(), t.TempDir()
	same := bytes.Repeat([]byte("x"), 1000)
	for i := range 100 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d", i)), same, 0o644))
	}
	s := openStore(t, state, 10_000)
	m, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1000), m.Bytes)
	assert.Equal(t, int64(1000), s.Stored())
	require.NoError(t, os.RemoveAll(root))
	_, err = s.Restore(ctx, m, true)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "f042"))
	require.NoError(t, err)
	assert.Equal(t, same, data)
}

// TestPackCompactionCrash: a crash after a compaction made its new pack
// durable but before the old one was removed leaves both; Open keeps one
// copy of each content, frees the other pack, and the checkpoint still
// restores.
func TestPackCompactionCrash(t *testing.T) {
	ctx := context.Background()
	root, state := t.TempDir(), t.TempDir()
	makeTree(t, root, 300)
	s := openStore(t, state, 0)
	first, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	for i := range 280 {
		p := filepath.Join(root, fmt.Sprintf("d%03d/f%05d.txt", i/100, i))
		require.NoError(t, os.WriteFile(p, fmt.Appendf(nil, "changed %d\n", i), 0o644))
	}
	second, err := s.Create(ctx, root, "", nil)
	require.NoError(t, err)
	want := sums(t, root)
	packs := filepath.Join(state, "checkpoints/packs")
	saved := t.TempDir()
	require.NoError(t, exec.Command("cp", "-a", packs+"/.", saved).Run())
	_, err = s.Delete(first.ID)
	require.NoError(t, err)
	stored := s.Stored()
	after, _ := packFiles(t, state)
	require.NoError(t, exec.Command("cp", "-an", saved+"/.", packs).Run()) // the old packs, back as a crash leaves them

	s = openStore(t, state, 0)
	assert.Equal(t, stored, s.Stored())
	names, size := packFiles(t, state)
	assert.Len(t, names, len(after), "one copy of the compacted content is freed")
	assert.Equal(t, size, s.DiskBytes())
	require.NoError(t, os.RemoveAll(root))
	_, err = s.Restore(ctx, second, true)
	require.NoError(t, err)
	assert.Equal(t, want, sums(t, root))
}
