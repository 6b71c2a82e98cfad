package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Pool mode refuses to start where it could not save a claim, rather than
// answer every claim 500; it leaves nothing behind where it can.
func TestNewPoolAuthNeedsAWritableDirectory(t *testing.T) {
	// /proc takes no new files, not even from root.
	_, err := NewPoolAuth("/proc/sandbox-secret")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool mode cannot save the claimed secret at /proc/sandbox-secret")
	assert.ErrorIs(t, err, ErrSecretPath) // the agent names its settings: see cmd/sandbox-executor's TestNewAuthNamesTheSettings

	if os.Geteuid() != 0 { // root writes to a read-only directory all the same
		ro := t.TempDir()
		require.NoError(t, os.Chmod(ro, 0o500))
		t.Cleanup(func() { _ = os.Chmod(ro, 0o700) })
		_, err = NewPoolAuth(filepath.Join(ro, "secret"))
		assert.ErrorContains(t, err, "is not writable")
	}

	dir := filepath.Join(t.TempDir(), "new", "dir")
	a, err := NewPoolAuth(filepath.Join(dir, "secret"))
	require.NoError(t, err)
	assert.False(t, a.Claimed())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err, "the directory is created")
	assert.Empty(t, entries, "the probe file is removed")
}
