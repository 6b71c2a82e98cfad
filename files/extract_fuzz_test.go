package files

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzExtract checks that whatever the archive, Extract writes nothing
// outside the directory (beside it is a sentinel directory, and a link
// in it to that directory), leaves no temporary directory, and unpacks
// no symbolic link that resolves outside.
func FuzzExtract(f *testing.F) {
	for _, ents := range [][]ent{
		{{name: "a", body: "a"}, {name: "d/", typ: tar.TypeDir}, {name: "d/b", body: "b"}},
		{{name: "l", typ: tar.TypeSymlink, link: "../outside"}, {name: "l/x", body: "x"}},
		{{name: "d/", typ: tar.TypeDir}, {name: "d/l", typ: tar.TypeSymlink, link: ".."}, {name: "x", typ: tar.TypeSymlink, link: "d/l/.."}},
		{{name: "f", body: "f"}, {name: "h", typ: tar.TypeLink, link: "f"}, {name: "h2", typ: tar.TypeLink, link: "../outside/s"}},
		{{name: "out/x", body: "x"}, {name: "./out", typ: tar.TypeSymlink, link: "."}},
		{{name: "ro/", typ: tar.TypeDir, mode: 0o500}, {name: "ro/f", body: "f"}, {name: "a/b/c/d", body: "deep"}},
	} {
		f.Add(mkTar(f, false, ents...))
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		base := t.TempDir()
		outside := filepath.Join(base, "outside")
		require.NoError(t, os.Mkdir(outside, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "s"), []byte("sentinel"), 0o644))
		dir := filepath.Join(base, "dst")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out"))) // an archive must replace it, never write through it
		_, _ = Extract(t.Context(), dir, bytes.NewReader(archive), ExtractOptions{Limit: 1 << 20, MaxEntries: 1000, Timeout: 2 * time.Second})

		des, err := os.ReadDir(base)
		require.NoError(t, err)
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		assert.Equal(t, []string{"dst", "outside"}, names, "nothing beside the directory")
		des, err = os.ReadDir(outside)
		require.NoError(t, err)
		require.Len(t, des, 1, "nothing written outside")
		b, err := os.ReadFile(filepath.Join(outside, "s"))
		require.NoError(t, err)
		assert.Equal(t, "sentinel", string(b))
		// The link put there before is not the archive's: what leads
		// through it leads where its maker chose.
		if to, err := os.Readlink(filepath.Join(dir, "out")); err == nil && to == outside {
			require.NoError(t, os.Remove(filepath.Join(dir, "out")))
		}
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return err
			}
			if to, err := filepath.EvalSymlinks(p); err == nil {
				assert.True(t, within(dir, to), "%s leads to %s", p, to)
			}
			return nil
		}))
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755) // so that the test's cleanup can remove what a mode closed
			}
			return nil
		})
	})
}
