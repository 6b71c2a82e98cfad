package edit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// TestPatchLinksOutsideRefused: a symbolic link inside cwd that leads
// outside it, to a file or to a directory, takes no read, update, add,
// delete or move there: each is refused as invalid (400), and nothing
// outside changes. A link that stays inside still works.
func TestPatchLinksOutsideRefused(t *testing.T) {
	outside := t.TempDir()
	secret := writeFile(t, outside, "secret.txt", "secret\n", 0o644)
	cwd := t.TempDir()
	require.NoError(t, os.Symlink(secret, filepath.Join(cwd, "file-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(cwd, "dir-link")))
	require.NoError(t, os.Symlink("../"+filepath.Base(outside)+"/secret.txt", filepath.Join(cwd, "rel-link")))
	inside := writeFile(t, cwd, "inside.txt", "one\n", 0o644)
	require.NoError(t, os.Symlink(inside, filepath.Join(cwd, "abs-link"))) // absolute, but inside: os.Root refuses it too
	tag := etagOf(t, secret)
	for name, patch := range map[string]string{
		"update through a file link":      "*** Update File: file-link\n-secret\n+changed\n",
		"update through a relative link":  "*** Update File: rel-link\n-secret\n+changed\n",
		"update through a directory link": "*** Update File: dir-link/secret.txt\n-secret\n+changed\n",
		"delete through a directory link": "*** Delete File: dir-link/secret.txt\n",
		"delete a link leading outside":   "*** Delete File: file-link\n",
		"add through a directory link":    "*** Add File: dir-link/new.txt\n+new\n",
		"add below a directory link":      "*** Add File: dir-link/sub/new.txt\n+new\n",
		"move through a directory link":   "*** Update File: inside.txt\n*** Move to: dir-link/moved.txt\n",
		"move a file from outside":        "*** Update File: dir-link/secret.txt\n*** Move to: stolen.txt\n",
		"update through an absolute link": "*** Update File: abs-link\n-one\n+changed\n",
	} {
		_, err := ApplyPatch(t.Context(), PatchRequest{Cwd: cwd, Patch: "*** Begin Patch\n" + patch + "*** End Patch"}, nil)
		assert.ErrorIs(t, err, ErrInvalid, name)
		assert.Equal(t, "secret\n", read(t, secret), name)
		assert.Equal(t, tag, etagOf(t, secret), name)
		ents, err := os.ReadDir(outside)
		require.NoError(t, err)
		assert.Len(t, ents, 1, "%s: nothing made outside", name)
		assert.Equal(t, "one\n", read(t, filepath.Join(cwd, "inside.txt")), name)
		assert.NoFileExists(t, filepath.Join(cwd, "stolen.txt"), name)
	}

	// A link that stays inside cwd is followed: the file it leads to is
	// updated, and the link stays a link.
	require.NoError(t, os.Symlink("inside.txt", filepath.Join(cwd, "in-link")))
	_, err := ApplyPatch(t.Context(), PatchRequest{Cwd: cwd, Patch: "*** Begin Patch\n*** Update File: in-link\n-one\n+two\n*** End Patch"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "two\n", read(t, filepath.Join(cwd, "inside.txt")))
	target, err := os.Readlink(filepath.Join(cwd, "in-link"))
	require.NoError(t, err)
	assert.Equal(t, "inside.txt", target)
}

// TestPatchRollbackAsUser: a patch applied as a user is undone as that
// user. nobody may replace root's file a.txt (world-writable, in a
// directory of nobody's): the update makes it nobody's. When a later
// file fails, the rollback puts a.txt's content back as nobody, who may
// not give it back to root: it stays nobody's. A rollback as the agent
// would have made it root's again.
func TestPatchRollbackAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can act as another user")
	}
	const nobody = 65534
	parent := t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(parent), 0o755))
	dir := filepath.Join(parent, "work")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chown(dir, nobody, nobody))
	a := writeFile(t, dir, "a.txt", "a1\n", 0o666)
	b := writeFile(t, dir, "b.txt", "b1\n", 0o666)
	o := &files.Owner{UID: nobody, GID: nobody, Groups: []uint32{nobody}}
	patch := "*** Begin Patch\n*** Update File: a.txt\n-a1\n+a2\n*** Update File: b.txt\n-b1\n+b2\n*** End Patch"
	_, err := applyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, o, func(i int) {
		if i == 1 {
			assert.Equal(t, "a2\n", read(t, a))
			assert.Equal(t, uint32(nobody), ownerOf(t, a), "written as nobody")
			require.NoError(t, os.WriteFile(b, []byte("b1 changed\n"), 0o666))
		}
	})
	require.ErrorIs(t, err, ErrStale)
	assert.Equal(t, "a1\n", read(t, a), "put back")
	assert.Equal(t, uint32(nobody), ownerOf(t, a), "put back as nobody, not as root")
	fi, err := os.Stat(a)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o666), fi.Mode().Perm())
}

func ownerOf(t *testing.T, p string) uint32 {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Uid
}
