package edit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPatchAdd(t *testing.T) {
	dir := t.TempDir()
	rep, err := ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** End Patch"}, nil)
	require.NoError(t, err)
	p := filepath.Join(dir, "hello.txt")
	assert.Equal(t, "Hello world\n", read(t, p))
	assert.Equal(t, []PatchFile{{Path: p, Action: "add", ETag: etagOf(t, p)}}, rep.Files)
	assert.Equal(t, "--- /dev/null\n+++ "+p+"\n@@ -0,0 +1 @@\n+Hello world\n", rep.Diff)

	// in new directories, from a fenced block, with \r\n, by an absolute path
	q := filepath.Join(dir, "a", "b", "new.py")
	_, err = ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: "```patch\r\n*** Begin Patch\r\n*** Add File: " + q + "\r\n+x = 1\r\n+\r\n+y = 2\r\n*** End Patch\r\n```\r\n"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "x = 1\n\ny = 2\n", read(t, q))
}

func TestPatchUpdateSeveralHunks(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "src/app.py", "import os\n\ndef greet(name):\n    print('hi', name)\n\ndef main():\n    greet('a')\n    greet('b')\n\nclass C:\n    def m(self):\n        return 1\n", 0o600)
	patch := `*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    print('hi', name)
+    print('hello', name)
@@ def main():
     greet('a')
-    greet('b')
+    greet('c')
@@ class C:
     def m(self):
-        return 1
+        return 2
*** End of File
*** End Patch
`
	rep, err := ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil)
	require.NoError(t, err)
	assert.Equal(t, "import os\n\ndef greet(name):\n    print('hello', name)\n\ndef main():\n    greet('a')\n    greet('c')\n\nclass C:\n    def m(self):\n        return 2\n", read(t, p))
	assert.Equal(t, "update", rep.Files[0].Action)
	assert.Contains(t, rep.Diff, "-    greet('b')\n+    greet('c')\n")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestPatchDeleteAndMove(t *testing.T) {
	dir := t.TempDir()
	gone := writeFile(t, dir, "old.txt", "bye\n", 0o644)
	src := writeFile(t, dir, "a.txt", "one\ntwo\n", 0o640)
	patch := "*** Begin Patch\n*** Delete File: old.txt\n*** Update File: a.txt\n*** Move to: moved/b.txt\n@@\n one\n-two\n+three\n*** End Patch\n"
	rep, err := ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil)
	require.NoError(t, err)
	assert.NoFileExists(t, gone)
	assert.NoFileExists(t, src)
	dst := filepath.Join(dir, "moved", "b.txt")
	assert.Equal(t, "one\nthree\n", read(t, dst))
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "a moved file keeps its mode")
	assert.Equal(t, []PatchFile{{Path: gone, Action: "delete"}, {Path: dst, Action: "move", ETag: etagOf(t, dst)}}, rep.Files)
	assert.Contains(t, rep.Diff, "--- "+gone+"\n+++ /dev/null\n")
	assert.Contains(t, rep.Diff, "--- "+src+"\n+++ "+dst+"\n")

	// a move alone keeps the content byte for byte (no final newline added)
	writeFile(t, dir, "raw.bin", "no newline", 0o644)
	_, err = ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: "*** Begin Patch\n*** Update File: raw.bin\n*** Move to: raw2.bin\n*** End Patch"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "no newline", read(t, filepath.Join(dir, "raw2.bin")))
}

// TestPatchAllOrNothing: a patch whose third file does not apply leaves
// the first two as they were; so does one whose third file fails while
// being written, after the first two were.
func TestPatchAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.txt", "a1\n", 0o644)
	b := writeFile(t, dir, "b.txt", "b1\n", 0o644)
	c := writeFile(t, dir, "c.txt", "c1\n", 0o644)
	tags := []string{etagOf(t, a), etagOf(t, b), etagOf(t, c)}
	patch := "*** Begin Patch\n*** Update File: a.txt\n-a1\n+a2\n*** Delete File: b.txt\n*** Update File: c.txt\n-nothing like it\n+c2\n*** End Patch"
	_, err := ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil)
	var he *HunkError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, c, he.File)
	assert.Equal(t, 1, he.Hunk)
	assert.Equal(t, []Line{{Line: 1, Text: "c1"}}, he.Nearest)
	assert.Equal(t, tags, []string{etagOf(t, a), etagOf(t, b), etagOf(t, c)}, "nothing was written")

	// The third file changes after the plan, while the first two are
	// being written: they are put back.
	patch = "*** Begin Patch\n*** Update File: a.txt\n-a1\n+a2\n*** Delete File: b.txt\n*** Update File: c.txt\n-c1\n+c2\n*** Add File: d.txt\n+d\n*** End Patch"
	_, err = applyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil, func(i int) {
		if i == 2 {
			assert.Equal(t, "a2\n", read(t, a), "the first file was written")
			assert.NoFileExists(t, b)
			require.NoError(t, os.WriteFile(c, []byte("c1 by another writer\n"), 0o644))
		}
	})
	assert.ErrorIs(t, err, ErrStale)
	assert.Equal(t, "a1\n", read(t, a))
	assert.Equal(t, "b1\n", read(t, b))
	assert.Equal(t, "c1 by another writer\n", read(t, c))
	assert.NoFileExists(t, filepath.Join(dir, "d.txt"))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 3, "no temporary file is left")

	// a deleted symbolic link comes back as the link it was
	require.NoError(t, os.Symlink("a.txt", filepath.Join(dir, "link")))
	patch = "*** Begin Patch\n*** Delete File: link\n*** Update File: b.txt\n-b1\n+b2\n*** End Patch"
	_, err = applyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil, func(i int) {
		if i == 1 {
			require.NoError(t, os.WriteFile(b, []byte("b1 changed\n"), 0o644))
		}
	})
	assert.ErrorIs(t, err, ErrStale)
	target, err := os.Readlink(filepath.Join(dir, "link"))
	require.NoError(t, err)
	assert.Equal(t, "a.txt", target)
}

// TestPatchModelMistakes: what Codex's apply_patch forgives is forgiven.
func TestPatchModelMistakes(t *testing.T) {
	dir := t.TempDir()
	// context with trailing whitespace the file does not have, and the
	// reverse; a file without its final newline gets one.
	p := writeFile(t, dir, "m.go", "func f() {\n\tx := 1\n\treturn x\n}", 0o644)
	patch := "*** Begin Patch\n*** Update File: m.go\n@@\n func f() {   \n-\tx := 1\n+\tx := 2\n \treturn x\n*** End Patch"
	_, err := ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil)
	require.NoError(t, err)
	assert.Equal(t, "func f() {\n\tx := 2\n\treturn x\n}\n", read(t, p))

	// leading whitespace off, and typographic quotes and dashes
	q := writeFile(t, dir, "q.txt", "    say(\"it's — fine\")\nend\n", 0o644)
	patch = "*** Begin Patch\n*** Update File: q.txt\n-say(\"it's - fine\")\n+    say(\"ok\")\n end\n*** End Patch"
	_, err = ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: patch}, nil)
	require.NoError(t, err)
	assert.Equal(t, "    say(\"ok\")\nend\n", read(t, q))

	// a CRLF file keeps CRLF
	r := writeFile(t, dir, "r.txt", "a\r\nb\r\n", 0o644)
	_, err = ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: "*** Begin Patch\n*** Update File: r.txt\n a\n-b\n+c\n+d\n*** End Patch"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "a\r\nc\r\nd\r\n", read(t, r))
}

func TestPatchRefusals(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "exists.txt", "x\n", 0o644)
	writeFile(t, dir, "src.txt", "s\n", 0o644)
	for name, tc := range map[string]struct {
		patch string
		want  error
	}{
		"add onto a file":   {"*** Begin Patch\n*** Add File: exists.txt\n+y\n*** End Patch", ErrConflict},
		"delete a missing":  {"*** Begin Patch\n*** Delete File: missing.txt\n*** End Patch", ErrConflict},
		"update a missing":  {"*** Begin Patch\n*** Update File: missing.txt\n-a\n+b\n*** End Patch", os.ErrNotExist},
		"outside cwd":       {"*** Begin Patch\n*** Add File: /etc/evil\n+y\n*** End Patch", ErrInvalid},
		"up and out":        {"*** Begin Patch\n*** Add File: ../evil\n+y\n*** End Patch", ErrInvalid},
		"no begin":          {"*** Add File: a\n+y\n*** End Patch", ErrInvalid},
		"no end":            {"*** Begin Patch\n*** Add File: a\n+y\n", ErrInvalid},
		"bad line":          {"*** Begin Patch\n*** Update File: exists.txt\n?x\n*** End Patch", ErrInvalid},
		"same file twice":   {"*** Begin Patch\n*** Update File: exists.txt\n-x\n+y\n*** Delete File: exists.txt\n*** End Patch", ErrInvalid},
		"move onto a file":  {"*** Begin Patch\n*** Add File: n.txt\n+n\n*** Update File: src.txt\n*** Move to: exists.txt\n*** End Patch", ErrConflict},
		"move a missing":    {"*** Begin Patch\n*** Add File: n.txt\n+n\n*** Update File: n2.txt\n*** Move to: n3.txt\n*** End Patch", os.ErrNotExist},
		"a hunk that fails": {"*** Begin Patch\n*** Update File: exists.txt\n@@ nowhere\n-x\n+y\n*** End Patch", ErrConflict},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ApplyPatch(t.Context(), PatchRequest{Cwd: dir, Patch: tc.patch}, nil)
			assert.True(t, errors.Is(err, tc.want), "%v", err)
			assert.Equal(t, "x\n", read(t, filepath.Join(dir, "exists.txt")))
			assert.NoFileExists(t, filepath.Join(dir, "n.txt"))
		})
	}
}
