package server

import (
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of the given size (such as "1m") on a new
// temporary directory and returns it; it is unmounted when the test ends.
// The test is skipped where the process may not mount (not root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
