package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exec -i's stdin goes through the side channel whatever it is, a regular
// file (sent by the kernel) or a pipe (in chunks), byte for byte, its end
// closing the command's stdin after the last byte: wc -c and sha256sum
// only answer then.
func TestCLIExecStdinSideChannel(t *testing.T) {
	a := startCLIAgent(t)
	data := make([]byte, 100<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	path := filepath.Join(t.TempDir(), "in")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	run := func(stdin io.Reader, cmd string) cliResult {
		var stdout, stderr bytes.Buffer
		o := options{stdin: stdin, stdout: &stdout}
		err := o.run(t.Context(), []string{"exec", "-i", "--", cmd}, getenv(a.env), &stderr)
		require.NoError(t, err)
		return cliResult{0, stdout.String(), stderr.String()}
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, cliResult{0, hex.EncodeToString(sum[:]) + "  -\n", ""}, run(f, "sha256sum"))

	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	go func() { _, _ = pw.Write(data); pw.Close() }()
	assert.Equal(t, cliResult{0, "104857600\n", ""}, run(pr, "wc -c"))
}
