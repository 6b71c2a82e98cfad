package files

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ownerOf(t *testing.T, p string) uint32 {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Uid
}

// With an Owner, everything the extraction creates is the owner's: the
// directory and its missing parents, the archive's files, directories
// (named or implied), links and hard links. What existed keeps its owner.
func TestExtractOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	nobody := &Owner{UID: nobodyID, GID: nobodyID, Groups: []uint32{nobodyID}}
	archive := mkTar(t, false,
		ent{name: "d/", typ: tar.TypeDir, mode: 0o750},
		ent{name: "d/f", body: "f", mode: 0o640},
		ent{name: "i/j/f", body: "implied"},
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		ent{name: "l", typ: tar.TypeSymlink, link: "d/f"},
		ent{name: "h", typ: tar.TypeLink, link: "d/f"},
	)
	base := t.TempDir()
	dir := filepath.Join(base, "p", "q", "dst")
	res, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{Owner: nobody})
	require.NoError(t, err)
	assert.True(t, res.Created)
	assert.Equal(t, uint32(0), ownerOf(t, base), "existed before")
	for _, p := range []string{"p", "p/q", "p/q/dst", "p/q/dst/d", "p/q/dst/d/f", "p/q/dst/i", "p/q/dst/i/j", "p/q/dst/i/j/f",
		"p/q/dst/ro", "p/q/dst/l", "p/q/dst/h"} {
		assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(base, p)), p)
	}
	assert.Equal(t, fs.FileMode(0o640), mode(t, filepath.Join(dir, "d", "f")), "modes kept")
	assert.Equal(t, fs.FileMode(0o555), mode(t, filepath.Join(dir, "ro")))

	// Into a directory that exists: it keeps its owner, the new entries
	// are the owner's.
	existing := filepath.Join(base, "mine")
	require.NoError(t, os.MkdirAll(filepath.Join(existing, "d"), 0o755))
	_, err = Extract(t.Context(), existing, bytes.NewReader(archive), ExtractOptions{Owner: nobody})
	require.NoError(t, err)
	assert.Equal(t, uint32(0), ownerOf(t, existing))
	assert.Equal(t, uint32(0), ownerOf(t, filepath.Join(existing, "d")), "merged, not replaced")
	assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(existing, "d", "f")))
	assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(existing, "l")))
}
