package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

const nobodyID = 65534

// TestHelperSubSwapper is not a test: run as nobody by
// TestCheckpointSwapRace, it swaps SUB_SWAP_DIR/sub between a directory
// and a symbolic link to SUB_SWAP_TARGET (a directory of root's), as fast
// as it can. It stops after 60 s or 10 million rounds, or when killed.
func TestHelperSubSwapper(t *testing.T) {
	dir, target := os.Getenv("SUB_SWAP_DIR"), os.Getenv("SUB_SWAP_TARGET")
	if dir == "" {
		t.Skip("run by TestCheckpointSwapRace")
	}
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < 10_000_000 && time.Now().Before(deadline); i++ {
		testutil.ToggleDirLink(filepath.Join(dir, "sub"), target)
		testutil.Spin(i)
	}
}

// An unprivileged user who may write in the directory root checkpoints
// swaps a directory of it for a link to a directory of root's, again and
// again while root checkpoints it: no checkpoint ever holds root's file.
func TestCheckpointSwapRace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacker runs as nobody")
	}
	shared, err := os.MkdirTemp("", "checkpoint-race-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(shared) })
	require.NoError(t, os.Chmod(shared, 0o755))
	secret := filepath.Join(shared, "secret")
	require.NoError(t, os.Mkdir(secret, 0o700))
	const leaked = "only root may read this"
	require.NoError(t, os.WriteFile(filepath.Join(secret, "f3"), []byte(leaked), 0o644))
	sum := sha256.Sum256([]byte(leaked))
	secretSum := hex.EncodeToString(sum[:])
	work := filepath.Join(shared, "work")
	for _, d := range []string{work, filepath.Join(work, "sub")} {
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.Chown(d, nobodyID, nobodyID))
	}
	for i := range 20 {
		f := filepath.Join(work, "sub", fmt.Sprintf("f%d", i))
		require.NoError(t, os.WriteFile(f, []byte("nobody's "+fmt.Sprint(i)), 0o644))
		require.NoError(t, os.Chown(f, nobodyID, nobodyID))
	}
	s := openStore(t, t.TempDir(), 1<<30)
	testutil.StartHelperAs(t, shared, "TestHelperSubSwapper", nobodyID, nobodyID,
		"SUB_SWAP_DIR="+work, "SUB_SWAP_TARGET="+secret)

	start := time.Now()
	made, failed := 0, 0
	for i := 0; i < 300 && time.Since(start) < 10*time.Second; i++ {
		m, err := s.Create(t.Context(), work, "", nil) // may fail: it is attacked
		if err != nil {
			failed++
			continue
		}
		made++
		for _, f := range m.Files {
			require.NotEqual(t, secretSum, f.SHA256, "round %d: %s holds root's file", i, f.Rel)
			require.False(t, strings.HasPrefix(f.Rel, "sub/") && f.UID == 0, "round %d: %s is root's", i, f.Rel)
		}
	}
	t.Logf("%d checkpoints made, %d refused", made, failed)
	assert.Positive(t, made)
}

// A restore sets modes without following a link: one put in the place of
// a directory or a file just before its mode is set back (where another
// user could put it) leaves the file it leads to as it was.
func TestRestoreModeNotFollowed(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sub", "same"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, d), 0o777))
		require.NoError(t, os.Chmod(filepath.Join(root, d), 0o777))
	}
	roots := filepath.Join(root, "roots")
	require.NoError(t, os.WriteFile(roots, []byte("root's\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "f"), []byte("v1\n"), 0o4755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "g"), []byte("same\n"), 0o4755))
	require.NoError(t, os.Chmod(filepath.Join(root, "f"), 0o4755))
	require.NoError(t, os.Chmod(filepath.Join(root, "g"), 0o4755))
	s := openStore(t, t.TempDir(), 1<<30)
	m, err := s.Create(t.Context(), root, "", nil)
	require.NoError(t, err)
	// Every mode to set back: the directories', f's (rewritten), g's (mode only).
	require.NoError(t, os.Chmod(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "f"), []byte("v2\n"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(root, "g"), 0o644))

	var swapped []string
	testHookBeforeChmod = func(rel string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if rel == "roots" {
			return
		}
		require.NoError(t, os.Rename(p, p+".moved"))
		require.NoError(t, os.Symlink("roots", p))
		swapped = append(swapped, rel)
	}
	t.Cleanup(func() { testHookBeforeChmod = func(string) {} })
	_, err = s.Restore(t.Context(), m, false)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"f", "g", "sub"}, swapped)
	fi, err := os.Lstat(roots)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode()&(os.ModePerm|os.ModeSetuid), "the file the links lead to keeps its mode")
}

// A manifest whose entry leads out of its directory (damaged, or made by
// hand) is refused whole by a restore, nothing written.
func TestRestoreRefusesEntryOutside(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "tree")
	require.NoError(t, os.Mkdir(root, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a"), []byte("a\n"), 0o644))
	s := openStore(t, t.TempDir(), 1<<30)
	m, err := s.Create(t.Context(), root, "", nil)
	require.NoError(t, err)
	require.Len(t, m.Files, 1)
	for _, rel := range []string{"../escaped", "/abs", ""} {
		bad := *m
		bad.Files = []Entry{m.Files[0]}
		bad.Files[0].Rel = rel
		_, err := s.Restore(t.Context(), &bad, false)
		require.ErrorIs(t, err, ErrDamaged, "%q", rel)
		assert.NoFileExists(t, filepath.Join(parent, "escaped"))
	}
}

// A restore sets a file's setuid and setgid bits only where the file has
// the recorded owner and group: where its chown did not take (an agent
// that is not root), the agent's user gets no setuid program of a file
// recorded as another's. Directories keep their bits.
func TestTreeChmodSetuidNeedsOwner(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "prog")
	require.NoError(t, os.WriteFile(p, nil, 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	tr, err := openTree(root)
	require.NoError(t, err)
	defer tr.close()
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())

	require.NoError(t, tr.chmod(Entry{Rel: "prog", Mode: 0o6755, UID: uid + 1, GID: gid + 1}))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid), "another's: no bits")

	require.NoError(t, tr.chmod(Entry{Rel: "prog", Mode: 0o6755, UID: uid, GID: gid}))
	fi, err = os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, 0o755|os.ModeSetuid|os.ModeSetgid, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid), "its owner's: both")

	require.NoError(t, tr.chmod(Entry{Rel: "d", Mode: 0o2775, UID: uid + 1, GID: gid + 1}))
	fi, err = os.Stat(filepath.Join(root, "d"))
	require.NoError(t, err)
	assert.Equal(t, 0o775|os.ModeSetgid, fi.Mode()&(os.ModePerm|os.ModeSetgid), "a directory keeps its setgid")
}
