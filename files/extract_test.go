package files

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// ent is an entry of an archive made by mkTar.
type ent struct {
	name string
	typ  byte // tar.TypeReg if zero
	body string
	link string
	mode int64 // 0644 if zero
}

func mkTar(t testing.TB, gz bool, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(&buf)
	if gz {
		tw = tar.NewWriter(zw)
	}
	for _, e := range ents {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)),
			ModTime: time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		require.NoError(t, tw.WriteHeader(hdr))
		_, err := tw.Write([]byte(e.body)[:hdr.Size])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	if gz {
		require.NoError(t, zw.Close())
	}
	return buf.Bytes()
}

// snapshot describes every entry under dir (and beside it, to catch
// temporary directories), as "name type mode content-or-target" lines.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	require.NoError(t, filepath.WalkDir(filepath.Dir(dir), func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		rel, _ := filepath.Rel(filepath.Dir(dir), p)
		line := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			line += " " + string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	}))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// A tree archived by WriteArchive comes back the same: contents, modes,
// links and file times. gzip too.
func TestExtractRoundTrip(t *testing.T) {
	src := archiveTree(t)
	require.NoError(t, os.Remove(filepath.Join(src, "fifo")))     // refused by Extract
	require.NoError(t, os.Remove(filepath.Join(src, "sock")))     // never archived
	require.NoError(t, os.Remove(filepath.Join(src, "etc-link"))) // leads outside: refused
	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		require.NoError(t, WriteArchive(t.Context(), &buf, src, ArchiveOptions{Gzip: gz}))
		dst := filepath.Join(t.TempDir(), "a", "copy")
		res, err := Extract(t.Context(), dst, &buf, ExtractOptions{Gzip: gz})
		require.NoError(t, err)
		assert.Equal(t, Extracted{Path: dst, Entries: 7, Size: 6 + 10 + 160_000, Created: true}, res)
		out, err := exec.Command("diff", "-r", "--no-dereference", src, dst).CombinedOutput()
		assert.NoError(t, err, "%s", out)
		assert.Equal(t, fs.FileMode(0o755), mode(t, filepath.Join(dst, "run.sh")))
		assert.Equal(t, fs.FileMode(0o600), mode(t, filepath.Join(dst, "sub", "deep", "b.bin")))
		assert.Equal(t, fs.FileMode(0o700), mode(t, filepath.Join(dst, "empty")))
		assert.Equal(t, fs.FileMode(0o755), mode(t, dst))
		fi, err := os.Stat(filepath.Join(dst, "a.txt"))
		require.NoError(t, err)
		assert.Equal(t, time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC), fi.ModTime().UTC())
		assert.Empty(t, testutil.Leftovers(t, filepath.Dir(dst)))
	}
}

// Into an existing directory: files replaced, others kept, directories
// merged, and a link in the way replaced rather than followed.
func TestExtractMerges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dst")
	outside := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "keep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep", "mine"), []byte("mine"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "sub")))

	res, err := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, false,
		ent{name: "./", typ: tar.TypeDir, mode: 0o755},
		ent{name: "./f", body: "new"},
		ent{name: "./keep/theirs", body: "theirs"},
		ent{name: "./sub/x", body: "x"},
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		ent{name: "ro/in", body: "in"},
		ent{name: "link", typ: tar.TypeSymlink, link: "keep/theirs"},
		ent{name: "hard", typ: tar.TypeLink, link: "ro/in"},
	)), ExtractOptions{})
	require.NoError(t, err)
	assert.False(t, res.Created)
	assert.Equal(t, 7, res.Entries)

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "new", read("f"))
	assert.Equal(t, "mine", read("keep/mine"))
	assert.Equal(t, "theirs", read("keep/theirs"))
	assert.Equal(t, "theirs", read("link"))
	assert.Equal(t, "in", read("hard"))
	fi, err := os.Lstat(filepath.Join(dir, "sub"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "the link in the way was replaced by the archive's directory")
	assert.Equal(t, "x", read("sub/x"))
	ents, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing was written through the link")
	assert.Equal(t, fs.FileMode(0o555), mode(t, filepath.Join(dir, "ro")), "restored once its entries are in")
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(dir)))
}

// Every refused archive names its entry and changes nothing.
func TestExtractRefuses(t *testing.T) {
	tests := []struct {
		name string
		ents []ent
		want string
	}{
		{"parent", []ent{{name: "ok", body: "1"}, {name: "../x", body: "x"}}, `entry "../x": its name has a .. element`},
		{"parent inside", []ent{{name: "a/../../x", body: "x"}}, `entry "a/../../x": its name has a .. element`},
		{"dotdot that stays", []ent{{name: "a/../b", body: "x"}}, `entry "a/../b": its name has a .. element`},
		{"absolute", []ent{{name: "/etc/x", body: "x"}}, `entry "/etc/x": its name is absolute`},
		{"link out", []ent{{name: "l", typ: tar.TypeSymlink, link: "../../etc"}}, `entry "l": a symbolic link to "../../etc", which leads outside the directory`},
		{"link absolute", []ent{{name: "l", typ: tar.TypeSymlink, link: "/etc"}}, `entry "l": a symbolic link to "/etc", outside the directory`},
		{"through a link", []ent{{name: "d/", typ: tar.TypeDir}, {name: "l", typ: tar.TypeSymlink, link: "d"}, {name: "l/x", body: "x"}},
			`entry "l/x": it goes through the symbolic link "l" of the archive`},
		{"chain out", []ent{{name: "a/", typ: tar.TypeDir}, {name: "x", typ: tar.TypeSymlink, link: "a/b/.."}, {name: "a/b", typ: tar.TypeSymlink, link: ".."}},
			`entry "x": a symbolic link to "a/b/..", with a .. element after a name: where it leads depends on what that name is, or may become`},
		{"hard link out", []ent{{name: "h", typ: tar.TypeLink, link: "../outside"}}, `entry "h": a hard link to "../outside", which is not a file of the archive`},
		{"hard link to link", []ent{{name: "l", typ: tar.TypeSymlink, link: "x"}, {name: "h", typ: tar.TypeLink, link: "l"}},
			`entry "h": a hard link to "l", which is not a regular file that came before it`},
		{"device", []ent{{name: "null", typ: tar.TypeChar}}, `entry "null": devices are not unpacked`},
		{"fifo", []ent{{name: "p", typ: tar.TypeFifo}}, `entry "p": named pipes are not unpacked`},
		{"dir replaced", []ent{{name: "d/", typ: tar.TypeDir}, {name: "d/x", body: "x"}, {name: "d", body: "file"}}, `entry "d": a directory of the same name came before it`},
		{"file in the way", []ent{{name: "f", body: "file"}, {name: "f/x", body: "x"}}, `entry "f/x": a file of the archive is in the way of its directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dst")
			require.NoError(t, os.Mkdir(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "ok"), []byte("0"), 0o644))
			before := snapshot(t, dir)
			_, err := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, false, tt.ents...)), ExtractOptions{})
			require.ErrorIs(t, err, ErrBadArchive)
			assert.Equal(t, "invalid archive: "+tt.want, err.Error())
			assert.Equal(t, before, snapshot(t, dir), "nothing changed, nothing left beside")
		})
	}
}

// A cut or corrupt archive changes nothing, whether dir exists or not.
func TestExtractCutArchive(t *testing.T) {
	ents := []ent{{name: "a", body: strings.Repeat("a", 5000)}, {name: "b/", typ: tar.TypeDir}, {name: "b/c", body: strings.Repeat("c", 5000)}}
	for _, gz := range []bool{false, true} {
		whole := mkTar(t, gz, ents...)
		corrupt := bytes.Clone(whole)
		corrupt[len(corrupt)-6] ^= 0xff // gzip's CRC, or a zero block of tar's end
		cases := map[string][]byte{"cut": whole[:len(whole)*2/3], "empty": nil, "not an archive": []byte(strings.Repeat("hello ", 200))}
		if gz {
			cases["corrupt"] = corrupt
		}
		for what, b := range cases {
			for _, exists := range []bool{false, true} {
				dir := filepath.Join(t.TempDir(), "dst")
				if exists {
					require.NoError(t, os.Mkdir(dir, 0o755))
				}
				before := snapshot(t, dir)
				_, err := Extract(t.Context(), dir, bytes.NewReader(b), ExtractOptions{Gzip: gz})
				if what == "empty" && !gz {
					require.NoError(t, err, "an empty stream is an empty tar archive")
					continue
				}
				require.ErrorIs(t, err, ErrBadArchive, "%s (gzip %v)", what, gz)
				assert.Equal(t, before, snapshot(t, dir), "%s (gzip %v, dir exists %v)", what, gz, exists)
			}
		}
	}
}

// A file of the archive where dir has a directory is EISDIR, found before
// anything moves.
func TestExtractDirectoryInTheWay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dst")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "d", "x"), 0o755))
	before := snapshot(t, dir)
	_, err := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, false, ent{name: "a", body: "a"}, ent{name: "d/x", body: "x"})), ExtractOptions{})
	require.ErrorIs(t, err, syscall.EISDIR)
	assert.EqualError(t, err, "extract "+filepath.Join(dir, "d", "x")+": is a directory")
	assert.Equal(t, before, snapshot(t, dir))

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = Extract(t.Context(), file, bytes.NewReader(mkTar(t, false, ent{name: "a", body: "a"})), ExtractOptions{})
	assert.ErrorIs(t, err, syscall.ENOTDIR)
}

// A full disk is ErrNoSpace and changes nothing.
func TestExtractNoSpace(t *testing.T) {
	fsDir := mountTmpfs(t, "1m")
	dir := filepath.Join(fsDir, "dst")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok"), []byte("0"), 0o644))
	before := snapshot(t, dir)
	big := ent{name: "big", body: strings.Repeat("x", 2<<20)}
	_, err := Extract(t.Context(), dir, bytes.NewReader(mkTar(t, true, ent{name: "ok", body: "1"}, big)), ExtractOptions{Gzip: true})
	require.ErrorIs(t, err, ErrNoSpace)
	assert.EqualError(t, err, "write big: no space left on device")
	assert.Equal(t, before, snapshot(t, dir))
}

// A directory given as a link is unpacked into where it leads.
func TestExtractIntoLink(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(real, link))
	_, err := Extract(t.Context(), link, bytes.NewReader(mkTar(t, false, ent{name: "a", body: "a"},
		ent{name: "abs", typ: tar.TypeSymlink, link: filepath.Join(real, "a")})), ExtractOptions{})
	require.NoError(t, err, "an absolute link inside the directory is inside")
	assert.FileExists(t, filepath.Join(real, "a"))
	assert.Empty(t, testutil.Leftovers(t, filepath.Dir(real)))
}
