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
	// The extraction runs with the owner's rights: base is theirs to
	// write, as a session's workdir is.
	base := ownedDir(t, filepath.Join(reachableDir(t), "base"), nobody)
	dir := filepath.Join(base, "p", "q", "dst")
	res, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{Owner: nobody})
	require.NoError(t, err)
	assert.True(t, res.Created)
	assert.Equal(t, uint32(nobodyID), ownerOf(t, base), "existed before")
	for _, p := range []string{"p", "p/q", "p/q/dst", "p/q/dst/d", "p/q/dst/d/f", "p/q/dst/i", "p/q/dst/i/j", "p/q/dst/i/j/f",
		"p/q/dst/ro", "p/q/dst/l", "p/q/dst/h"} {
		assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(base, p)), p)
	}
	assert.Equal(t, fs.FileMode(0o640), mode(t, filepath.Join(dir, "d", "f")), "modes kept")
	assert.Equal(t, fs.FileMode(0o555), mode(t, filepath.Join(dir, "ro")))

	// Into a directory that exists: it keeps its owner, the new entries
	// are the owner's. (Root's, but open to all, so that the owner may
	// write there.)
	existing := filepath.Join(base, "mine")
	require.NoError(t, os.MkdirAll(filepath.Join(existing, "d"), 0o755))
	require.NoError(t, os.Chmod(existing, 0o777))
	require.NoError(t, os.Chmod(filepath.Join(existing, "d"), 0o777))
	_, err = Extract(t.Context(), existing, bytes.NewReader(archive), ExtractOptions{Owner: nobody})
	require.NoError(t, err)
	assert.Equal(t, uint32(0), ownerOf(t, existing))
	assert.Equal(t, uint32(0), ownerOf(t, filepath.Join(existing, "d")), "merged, not replaced")
	assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(existing, "d", "f")))
	assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(existing, "l")))
}

// With an Owner, the extraction has the owner's rights, not the agent's:
// into a directory only root may write, it is refused and nothing is
// made, not made as root and given away.
func TestExtractOwnerRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	nobody := &Owner{UID: nobodyID, GID: nobodyID, Groups: []uint32{nobodyID}}
	archive := mkTar(t, false, ent{name: "f", body: "f"})
	rootOnly := reachableDir(t) // root's, 0755: nobody may enter, not write
	for _, dir := range []string{filepath.Join(rootOnly, "new"), filepath.Join(rootOnly, "a", "b"), rootOnly} {
		_, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{Owner: nobody})
		require.ErrorIs(t, err, fs.ErrPermission, dir)
		entries, err := os.ReadDir(rootOnly)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing made in %s", rootOnly)
	}
	_, err := Extract(t.Context(), filepath.Join(rootOnly, "new"), bytes.NewReader(archive), ExtractOptions{})
	require.NoError(t, err, "the agent itself may")
}

// A link a user planted is never followed by a root extraction, at the
// end of the path or on the way: as for every write (see trustLink).
func TestExtractRefusesPlantedLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the link is nobody's")
	}
	nobody := &Owner{UID: nobodyID, GID: nobodyID, Groups: []uint32{nobodyID}}
	archive := mkTar(t, false, ent{name: "f", body: "f"})
	secret := t.TempDir() // root's, 0700
	work := ownedDir(t, filepath.Join(reachableDir(t), "work"), nobody)
	for _, link := range []string{"final", "way"} {
		runAs(t, nobody, "ln", "-s", secret, filepath.Join(work, link))
	}
	for _, dir := range []string{filepath.Join(work, "final"), filepath.Join(work, "way", "sub")} {
		_, err := Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{})
		require.ErrorIs(t, err, fs.ErrPermission, dir)
	}
	entries, err := os.ReadDir(secret)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written through nobody's links")

	// As nobody, its own links are followed, and the rights are its own.
	target := ownedDir(t, filepath.Join(filepath.Dir(work), "target"), nobody)
	runAs(t, nobody, "ln", "-s", target, filepath.Join(work, "mine"))
	_, err = Extract(t.Context(), filepath.Join(work, "mine"), bytes.NewReader(archive), ExtractOptions{Owner: nobody})
	require.NoError(t, err)
	assert.Equal(t, uint32(nobodyID), ownerOf(t, filepath.Join(target, "f")))
}
