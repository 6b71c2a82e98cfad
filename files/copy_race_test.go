package files

import (
	"bytes"
	"fmt"
	"io/fs"
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

// TestHelperCopySwapper is not a test: run as nobody by
// TestCopySwapRace, it swaps, as fast as it can, every temporary copy
// directory in COPY_SWAP_DIR for a symbolic link to COPY_SWAP_TARGET (a
// directory of root's), and COPY_SWAP_DIR/src/sub between a directory
// and such a link. It stops after 60 s or 10 million rounds, or when
// killed.
func TestHelperCopySwapper(t *testing.T) {
	dir, target := os.Getenv("COPY_SWAP_DIR"), os.Getenv("COPY_SWAP_TARGET")
	if dir == "" {
		t.Skip("run by TestCopySwapRace")
	}
	deadline := time.Now().Add(60 * time.Second)
	tmps, subs := 0, 0
	for i := 0; i < 10_000_000 && time.Now().Before(deadline); i++ {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".sandbox-copy-") && de.IsDir() {
				p := filepath.Join(dir, de.Name())
				if os.Rename(p, filepath.Join(dir, "moved-"+strconv.Itoa(tmps))) == nil {
					_ = os.Symlink(target, p)
					tmps++
				}
			}
		}
		if testutil.ToggleDirLink(filepath.Join(dir, "src", "sub"), target) {
			subs++
		}
		testutil.Spin(i)
	}
	fmt.Println("swapped temporary directories:", tmps, "source directories:", subs)
}

// An unprivileged user who may write where a copy reads and where it
// writes (a session's workdir) swaps a directory of the source for a link
// to a directory of root's, and the copy's temporary directory for
// another, again and again while root copies: root never reads root's
// directory into the copy, and never writes into it.
func TestCopySwapRace(t *testing.T) {
	shared := sharedDir(t)
	secret := filepath.Join(shared, "secret")
	require.NoError(t, os.Mkdir(secret, 0o700))
	const leaked = "only root may read this"
	require.NoError(t, os.WriteFile(filepath.Join(secret, "key"), []byte(leaked), 0o644))
	work := filepath.Join(shared, "work")
	src := filepath.Join(work, "src")
	for _, d := range []string{work, src, filepath.Join(src, "sub")} {
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.Chown(d, nobodyID, nobodyID))
	}
	for i := range 50 {
		f := filepath.Join(src, "sub", fmt.Sprintf("f%d", i))
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
		require.NoError(t, os.Chown(f, nobodyID, nobodyID))
	}
	startAsNobody(t, shared, "TestHelperCopySwapper", "COPY_SWAP_DIR="+work, "COPY_SWAP_TARGET="+secret)

	start := time.Now()
	rounds := 0
	for i := 0; i < 300 && time.Since(start) < 10*time.Second; i++ {
		dst := filepath.Join(work, "copy"+strconv.Itoa(i))
		_ = Copy(t.Context(), src, dst, false, true, nil) // may fail: it is attacked
		rounds++
		des, err := os.ReadDir(secret)
		require.NoError(t, err)
		require.Len(t, des, 1, "root wrote into a directory only root may write, on round %d", i)
		err = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err == nil && bytes.Contains(b, []byte(leaked)) {
				return fmt.Errorf("%s holds root's secret", p)
			}
			return nil
		})
		require.NoError(t, err, "round %d", i)
	}
	moved, _ := filepath.Glob(filepath.Join(work, "moved-*"))
	t.Logf("%d copies; %d temporary directories swapped", rounds, len(moved))
	assert.NotEmpty(t, moved, "the attack ran")
}

// TestHelperFileSwapper is not a test: run as nobody by TestChmodSwapRace,
// it swaps FILE_SWAP_DIR/f between a file of its own and a symbolic link
// to FILE_SWAP_TARGET (a file of root's), as fast as it can. It stops
// after 60 s or 10 million rounds, or when killed.
func TestHelperFileSwapper(t *testing.T) {
	dir, target := os.Getenv("FILE_SWAP_DIR"), os.Getenv("FILE_SWAP_TARGET")
	if dir == "" {
		t.Skip("run by TestChmodSwapRace")
	}
	f, link := filepath.Join(dir, "f"), filepath.Join(dir, "f.link")
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < 10_000_000 && time.Now().Before(deadline); i++ {
		_ = os.Symlink(target, link)
		_ = os.Rename(link, f) // f is the link now
		testutil.Spin(i)
		_ = os.Remove(f)
		if w, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			w.Close()
		}
		testutil.Spin(i)
	}
}

// An unprivileged user swaps a file of theirs for a link to a file of
// root's, again and again while root changes the file's mode: root's
// file keeps its mode.
func TestChmodSwapRace(t *testing.T) {
	shared := sharedDir(t)
	target := filepath.Join(shared, "roots")
	require.NoError(t, os.WriteFile(target, []byte("root's\n"), 0o600))
	work := filepath.Join(shared, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	require.NoError(t, os.Chown(work, nobodyID, nobodyID))
	startAsNobody(t, shared, "TestHelperFileSwapper", "FILE_SWAP_DIR="+work, "FILE_SWAP_TARGET="+target)

	start := time.Now()
	changed := 0
	for i := 0; i < 2000 && time.Since(start) < 10*time.Second; i++ {
		if Chmod(filepath.Join(work, "f"), 0o777, nil) == nil { // may fail: it is attacked
			changed++
		}
		fi, err := os.Stat(target)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "root's file changed mode on round %d", i)
	}
	t.Logf("%d modes changed", changed)
	assert.Positive(t, changed)
}
