package files

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

const nobodyID = 65534

// sharedDir makes a directory that nobody may enter (mode 0755 on the way
// down), removed when the test ends. t.TempDir's are 0700.
func sharedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacker runs as nobody")
	}
	dir, err := os.MkdirTemp("", "extract-race-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startAsNobody runs this test binary's helper test as nobody, with env;
// see testutil.StartHelperAs.
func startAsNobody(t *testing.T, shared, helper string, env ...string) {
	t.Helper()
	testutil.StartHelperAs(t, shared, helper, nobodyID, nobodyID, env...)
}

// TestHelperSwapper is not a test: run as nobody by startAsNobody, it
// swaps, as fast as it can, every temporary extraction directory in
// SWAP_DIR and the directory SWAP_DIR/dst/sub for symbolic links to
// SWAP_TARGET, a directory only root may write. It stops after 60 s or
// 10 million swaps, or when killed.
func TestHelperSwapper(t *testing.T) {
	dir, target := os.Getenv("SWAP_DIR"), os.Getenv("SWAP_TARGET")
	if dir == "" {
		t.Skip("run by TestExtractSwapRace")
	}
	deadline := time.Now().Add(60 * time.Second)
	swaps := 0
	swap := func(p string) {
		moved := filepath.Join(filepath.Dir(p), "moved-"+strconv.Itoa(swaps))
		if os.Rename(p, moved) == nil {
			_ = os.Symlink(target, p)
			swaps++
		}
	}
	for i := 0; i < 10_000_000 && time.Now().Before(deadline); i++ {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			if strings.Contains(de.Name(), ".extract-") && de.IsDir() {
				swap(filepath.Join(dir, de.Name()))
			}
		}
		if fi, err := os.Lstat(filepath.Join(dir, "dst", "sub")); err == nil && fi.IsDir() {
			swap(filepath.Join(dir, "dst", "sub"))
		}
	}
	fmt.Println("swaps:", swaps)
}

// An unprivileged user who may write where the extraction works (a
// session's workdir) swaps its temporary directory, and a directory the
// archive merges into, for links to a directory only root may write,
// again and again while root extracts: nothing is ever written there.
func TestExtractSwapRace(t *testing.T) {
	shared := sharedDir(t)
	secret := filepath.Join(shared, "secret")
	require.NoError(t, os.Mkdir(secret, 0o700))
	work := filepath.Join(shared, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	require.NoError(t, os.Chown(work, nobodyID, nobodyID))
	dst := filepath.Join(work, "dst")
	require.NoError(t, os.MkdirAll(filepath.Join(dst, "sub"), 0o755))
	require.NoError(t, os.Chown(dst, nobodyID, nobodyID)) // the user's own directory, merged into
	require.NoError(t, os.Chown(filepath.Join(dst, "sub"), nobodyID, nobodyID))

	var ents []ent
	for i := range 300 {
		ents = append(ents, ent{name: fmt.Sprintf("sub/f%d", i), body: "x"}, ent{name: fmt.Sprintf("top%d", i), body: "y"})
	}
	archive := mkTar(t, false, ents...)
	startAsNobody(t, shared, "TestHelperSwapper", "SWAP_DIR="+work, "SWAP_TARGET="+secret)

	start := time.Now()
	for i := 0; i < 200 && time.Since(start) < 8*time.Second; i++ {
		_, _ = Extract(t.Context(), dst, bytes.NewReader(archive), ExtractOptions{}) // may fail: it is attacked
		des, err := os.ReadDir(secret)
		require.NoError(t, err)
		require.Empty(t, des, "root wrote into a directory only root may write, on round %d", i)
	}
	// Also into a directory that does not exist yet: the temporary
	// directory itself becomes it.
	for i := 0; i < 200 && time.Since(start) < 12*time.Second; i++ {
		_, _ = Extract(t.Context(), filepath.Join(work, "new"+strconv.Itoa(i)), bytes.NewReader(archive), ExtractOptions{})
		des, err := os.ReadDir(secret)
		require.NoError(t, err)
		require.Empty(t, des, "root wrote into a directory only root may write, on new round %d", i)
	}
	moved, _ := filepath.Glob(filepath.Join(work, "moved-*"))
	movedSub, _ := filepath.Glob(filepath.Join(dst, "moved-*"))
	t.Logf("swapped %d temporary directories and %d merged ones", len(moved), len(movedSub))
	assert.NotEmpty(t, moved, "the attack ran")
}
