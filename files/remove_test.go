package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DeleteDir keeps os.RemoveAll's error texts.
func TestDeleteDirErrorsAsRemoveAll(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may remove anything")
	}
	mk := func() string {
		dir := filepath.Join(t.TempDir(), "d")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "ro", "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ro", "sub", "f"), nil, 0o644))
		require.NoError(t, os.Chmod(filepath.Join(dir, "ro"), 0o555))
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755) })
		return dir
	}
	d1, d2 := mk(), mk()
	want := os.RemoveAll(d1)
	require.Error(t, want)
	got := DeleteDir(t.Context(), d2)
	require.Error(t, got)
	assert.Equal(t, strings.ReplaceAll(want.Error(), d1, "D"), strings.ReplaceAll(got.Error(), d2, "D"))
}
