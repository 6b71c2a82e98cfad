package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// install copies the running binary, byte for byte and executable, and
// replaces an earlier copy; without a directory it is a usage error.
func TestInstallCopiesTheBinary(t *testing.T) {
	self, err := os.ReadFile("/proc/self/exe")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "agent")
	want := filepath.Join(dir, "sandbox-executor")

	for range 2 { // the second replaces the first
		r := runCLI(t, nil, nil, "install", dir)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, want+"\n", r.stdout)
		got, err := os.ReadFile(want)
		require.NoError(t, err)
		assert.True(t, string(self) == string(got), "the copy differs from the binary")
		fi, err := os.Stat(want)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "no temporary file is left")
	}

	r := runCLI(t, nil, nil, "install")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "want one directory")

	r = runCLI(t, nil, nil, "install", "/proc/no-such-dir")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "sandbox-executor install:")
}
