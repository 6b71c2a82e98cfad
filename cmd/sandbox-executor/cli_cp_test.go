package main

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cp streams: a file over the JSON endpoints' 64 MiB goes both ways.
func TestCLICpLargeFile(t *testing.T) {
	a := startCLIAgent(t)
	local, remote := t.TempDir(), t.TempDir()
	data := make([]byte, 70<<20)
	_, _ = rand.Read(data)
	src := filepath.Join(local, "big.bin")
	require.NoError(t, os.WriteFile(src, data, 0o644))

	cpRoundTrip(t, a, data, src, "sandbox:"+remote+"/", filepath.Join(remote, "big.bin"), filepath.Join(local, "back.bin"))
}

// cpTree makes a small tree with a nested file, an empty directory, an
// executable and a link inside it.
func cpTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "f.txt"), []byte("nested"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Symlink("a/b/f.txt", filepath.Join(dir, "link")))
	return dir
}

func sameTree(t *testing.T, want, got string) {
	t.Helper()
	out, err := exec.Command("diff", "-r", "--no-dereference", want, got).CombinedOutput()
	assert.NoError(t, err, "%s", out)
}

func TestCLICpRecursive(t *testing.T) {
	a := startCLIAgent(t)
	tree := cpTree(t)
	remote := t.TempDir()

	// Up: to a new name, then into an existing directory.
	r := runCLI(t, a.env, nil, "cp", "-r", tree, "sandbox:"+filepath.Join(remote, "copy"))
	require.Equal(t, cliResult{0, "", ""}, r)
	sameTree(t, tree, filepath.Join(remote, "copy"))
	r = runCLI(t, a.env, nil, "cp", "-r", tree, "sandbox:"+remote)
	require.Equal(t, cliResult{0, "", ""}, r)
	sameTree(t, tree, filepath.Join(remote, "tree"))

	// Down: the same two ways.
	local := t.TempDir()
	r = runCLI(t, a.env, nil, "cp", "-r", "sandbox:"+filepath.Join(remote, "copy"), filepath.Join(local, "down"))
	require.Equal(t, cliResult{0, "", ""}, r)
	sameTree(t, tree, filepath.Join(local, "down"))
	r = runCLI(t, a.env, nil, "cp", "-r", "sandbox:"+filepath.Join(remote, "copy"), local)
	require.Equal(t, cliResult{0, "", ""}, r)
	sameTree(t, tree, filepath.Join(local, "copy"))

	// A file with -r is copied as a file.
	r = runCLI(t, a.env, nil, "cp", "-r", filepath.Join(tree, "run.sh"), "sandbox:"+filepath.Join(remote, "run.sh"))
	require.Equal(t, cliResult{0, "", ""}, r)
	assert.FileExists(t, filepath.Join(remote, "run.sh"))

	// - is a tar archive with -r, both ways.
	var out bytes.Buffer
	code := runCLIWith(t, a.env, nil, &out, io.Discard, "cp", "-r", "sandbox:"+tree, "-")
	require.Equal(t, 0, code)
	var names []string
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, hdr.Name)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"a/", "a/b/", "a/b/f.txt", "empty/", "link", "run.sh"}, names)
	tarball, err := exec.Command("tar", "-C", tree, "-cf", "-", ".").Output()
	require.NoError(t, err)
	r = runCLI(t, a.env, tarball, "cp", "-r", "-", "sandbox:"+filepath.Join(remote, "fromtar"))
	require.Equal(t, cliResult{0, "", ""}, r)
	sameTree(t, tree, filepath.Join(remote, "fromtar"))
}

// A tree whose link leads outside it is refused when it is unpacked,
// here as on the agent, and nothing is written.
func TestCLICpRecursiveRefusesLinksOut(t *testing.T) {
	a := startCLIAgent(t)
	tree := cpTree(t)
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(tree, "out")))
	local := filepath.Join(t.TempDir(), "down")
	r := runCLI(t, a.env, nil, "cp", "-r", "sandbox:"+tree, local)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, `sandbox-executor cp: invalid archive: entry "out": a symbolic link to "/etc/passwd", outside the directory`+"\n", r.stderr)
	assert.NoDirExists(t, local)

	remote := filepath.Join(t.TempDir(), "up")
	r = runCLI(t, a.env, nil, "cp", "-r", tree, "sandbox:"+remote)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `invalid archive: entry "out"`)
	assert.Contains(t, r.stderr, "(400 Bad Request)")
	assert.NoDirExists(t, remote)
}
