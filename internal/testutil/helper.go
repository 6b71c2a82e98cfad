package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// StartHelperAs runs this test binary's helper test (a TestHelper...
// function, which does nothing unless its environment says what to do)
// as the user uid:gid, with env, and stops it, by its pid, when the test
// ends, logging what it printed. The binary is copied into dir first,
// which uid must be able to reach: the test binary's own directory
// usually is not.
func StartHelperAs(tb testing.TB, dir, helper string, uid, gid uint32, env ...string) {
	tb.Helper()
	self, err := os.Executable()
	require.NoError(tb, err)
	bin := filepath.Join(dir, "helper-"+helper)
	b, err := os.ReadFile(self)
	require.NoError(tb, err)
	require.NoError(tb, os.WriteFile(bin, b, 0o755))
	cmd := exec.Command(bin, "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(tb, cmd.Start())
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tb.Logf("%s: %s", helper, strings.TrimSpace(out.String()))
	})
}

// ToggleDirLink is one step of an attacker's loop in a race test: if path
// is a directory, it moves it to path+".real" and puts a symbolic link to
// target in its place, and reports true; else it puts the directory back.
func ToggleDirLink(path, target string) bool {
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		if os.Rename(path, path+".real") == nil {
			_ = os.Symlink(target, path)
			return true
		}
		return false
	}
	_ = os.Remove(path)
	_ = os.Rename(path+".real", path)
	return false
}

// Spin busies the caller for a varying few microseconds (i picks how
// long), so that each state of a swap lasts long enough, at times, to be
// seen whole.
func Spin(i int) {
	for range (i % 16) * 50 {
		_ = os.Getpid()
	}
}
