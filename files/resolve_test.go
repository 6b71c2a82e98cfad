package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// resolveTree makes, in a new directory, the tree FuzzResolve walks:
// in: a/, a/b/, a/up -> .., a/abs -> <in>/a/b, loop -> loop, f, and w/
// owned by nobody; out: o/, o/sub/. When the test runs as root, w/evil ->
// <out>/o and w/evilrel -> ../../out/o/sub are nobody's links, which a
// write by root must never follow. It returns the two roots and the
// identities of out's directories.
func resolveTree(tb testing.TB) (in, out string, outside map[[2]uint64]bool) {
	tb.Helper()
	base := tb.TempDir()
	in, out = filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, in + "/a", in + "/a/b", in + "/w", out, out + "/o", out + "/o/sub"} {
		require.NoError(tb, os.Mkdir(d, 0o755))
	}
	require.NoError(tb, os.WriteFile(in+"/f", nil, 0o644))
	require.NoError(tb, os.Symlink("..", in+"/a/up"))
	require.NoError(tb, os.Symlink(in+"/a/b", in+"/a/abs"))
	require.NoError(tb, os.Symlink("loop", in+"/loop"))
	if os.Geteuid() == 0 {
		require.NoError(tb, os.Symlink(out+"/o", in+"/w/evil"))
		require.NoError(tb, os.Symlink("../../out/o/sub", in+"/w/evilrel"))
		for _, p := range []string{in + "/w", in + "/w/evil", in + "/w/evilrel"} {
			require.NoError(tb, os.Lchown(p, 65534, 65534))
		}
	}
	outside = map[[2]uint64]bool{}
	for _, d := range []string{out + "/o", out + "/o/sub"} {
		var st unix.Stat_t
		require.NoError(tb, unix.Stat(d, &st))
		outside[[2]uint64{st.Dev, st.Ino}] = true
	}
	return in, out, outside
}

// FuzzResolve checks that a walk by root never ends in a directory it
// could reach only through a link of nobody's, and that, where it ends,
// the kernel, resolving the same path by itself, ends too.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"a/b/x", "a/up/a/b/x", "a/abs/../x", "w/evil/x", "w/evil/sub/x", "w/evilrel/x",
		"../../../../x", "loop/x", "f/x", "a/./b/../../w/evil", "w/evil", ".", "", "a/b/", "a/up/w/evil/..",
		"a//b/./x", "w/evil/../x"} {
		f.Add(s)
	}
	in, _, outside := resolveTree(f)
	f.Fuzz(func(t *testing.T, p string) {
		if strings.IndexByte(p, 0) >= 0 || len(p) > 512 {
			return
		}
		full := in + "/" + p
		for _, followFinal := range []bool{false, true} {
			dir, name, err := newWalker(nil, false).resolve(full, "open", followFinal)
			if err != nil {
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe, "%q", p)
				continue
			}
			var st unix.Stat_t
			require.NoError(t, unix.Fstat(int(dir.Fd()), &st))
			dir.Close()
			require.False(t, outside[[2]uint64{st.Dev, st.Ino}], "%q resolved outside, through a link of nobody's", p)
			require.NotEmpty(t, name)
			require.NotContains(t, name, "/")
			require.NotEqual(t, "..", name)
			if followFinal {
				continue
			}
			els := elements(full)
			want := "/" + strings.Join(els[:len(els)-1], "/")
			var kst unix.Stat_t
			if kerr := unix.Stat(want, &kst); kerr == nil {
				assert.Equal(t, [2]uint64{kst.Dev, kst.Ino}, [2]uint64{st.Dev, st.Ino}, "%q: the kernel resolves %s elsewhere", p, want)
			} else if !errors.Is(kerr, syscall.ENAMETOOLONG) {
				t.Errorf("%q: the walk ended in a directory, the kernel fails: %v", p, kerr)
			}
		}
	})
}

func TestElements(t *testing.T) {
	tests := []struct {
		path string
		want []string
	}{
		{"/a/b", []string{"a", "b"}},
		{"/a/b/", []string{"a", "b", "."}},
		{"/a/./b/.", []string{"a", "b", "."}},
		{"/a/..", []string{"a", "..", "."}},
		{"/", []string{"."}},
		{"a//b", []string{"a", "b"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, elements(tt.path), tt.path)
	}
}

// A walk closes every directory it opened but the one it returns,
// whether it ends or fails.
func TestResolveClosesDirectories(t *testing.T) {
	in, _, _ := resolveTree(t)
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(ents)
	}
	before := count()
	for _, p := range []string{"a/b/x", "a/up/a/abs/x", "loop/x", "f/x", "w/evil/x", "nope/x", "a/b/"} {
		for range 10 {
			w := newWalker(nil, false)
			if dir, _, err := w.resolve(in+"/"+p, "open", true); err == nil {
				dir.Close()
			}
		}
	}
	w := newWalker(nil, true)
	dir, _, err := w.resolve(in+"/new/deeper/x", "open", true)
	require.NoError(t, err)
	dir.Close()
	w.removeMade()
	assert.NoDirExists(t, in+"/new")
	assert.Equal(t, before, count())
}
