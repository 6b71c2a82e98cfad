package files

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// swapEnv, set in the environment of the test binary run as a helper,
// names the directory whose "sub" TestSwapHelper swaps, and swapTarget
// where its link leads.
const (
	swapEnv    = "FILES_TEST_SWAP_DIR"
	swapTarget = "FILES_TEST_SWAP_TARGET"
)

// TestSwapHelper is not a test: run as nobody by TestUploadRaceSwap, it
// swaps the directory $FILES_TEST_SWAP_DIR/sub with a link to
// $FILES_TEST_SWAP_TARGET and back, as fast as it can, until it is killed
// or a minute has passed.
func TestSwapHelper(t *testing.T) {
	dir := os.Getenv(swapEnv)
	if dir == "" {
		return
	}
	target := os.Getenv(swapTarget)
	sub, tmp := filepath.Join(dir, "sub"), filepath.Join(dir, "sub.link")
	deadline := time.Now().Add(time.Minute)
	// Each round moves sub away for good (root may have put files in it
	// that nobody cannot remove) and makes a new one after the link.
	for i := 0; i < 50_000 && time.Now().Before(deadline); i++ {
		_ = os.Rename(sub, filepath.Join(dir, "old-"+strconv.Itoa(i)))
		_ = os.Symlink(target, tmp)
		_ = os.Rename(tmp, sub)
		testutil.Spin(i)
		_ = os.Remove(sub)
		_ = os.Mkdir(sub, 0o755)
		testutil.Spin(i)
	}
}

// A program of nobody's swapping a directory of an upload's path for a
// link to a directory of root's, while root writes there, never makes
// root write in root's directory: each write lands in nobody's directory
// or is refused.
func TestUploadRaceSwap(t *testing.T) {
	nb := nobody(t)
	base := reachableDir(t)
	target := filepath.Join(base, "target")
	require.NoError(t, os.Mkdir(target, 0o755))
	work := ownedDir(t, filepath.Join(base, "work"), nb)
	ownedDir(t, filepath.Join(work, "sub"), nb)

	// The test binary, where nobody may run it.
	exe, err := os.Executable()
	require.NoError(t, err)
	helper := filepath.Join(base, "helper")
	copyFile(t, exe, helper)
	cmd := exec.Command(helper, "-test.run=^TestSwapHelper$")
	cmd.Env = append(os.Environ(), swapEnv+"="+work, swapTarget+"="+target)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nb.UID, Gid: nb.GID}}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	p := filepath.Join(work, "sub", "f")
	refused, written := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 20_000 && (refused < 200 || written < 200) && time.Now().Before(deadline); i++ {
		var err error
		switch i % 3 {
		case 0:
			_, err = WriteAtomic(t.Context(), p, strings.NewReader("x"), WriteOptions{})
		case 1:
			_, err = WriteAt(t.Context(), p, strings.NewReader("x"), AtEnd, WriteOptions{})
		case 2:
			err = MakeDir(filepath.Join(work, "sub", "d"), nil)
		}
		switch {
		case err == nil:
			written++
		case errors.Is(err, fs.ErrPermission):
			refused++
		}
		entries, rerr := os.ReadDir(target)
		require.NoError(t, rerr)
		require.Empty(t, entries, "root wrote through nobody's link, at attempt %d", i)
	}
	t.Logf("%d writes refused, %d written", refused, written)
	assert.Positive(t, refused, "the race was never won by the link: the test proved nothing")
	assert.Positive(t, written)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
