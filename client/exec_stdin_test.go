package client_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// expectingClient returns a Client for a with a transport that waits for
// 100 Continue, as http.DefaultTransport (the CLI's) does.
func expectingClient(t *testing.T, a *testAgent) *client.Client {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 5e9}}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := client.New(a.ts.URL, testSecret, client.WithHTTPClient(hc))
	require.NoError(t, err)
	return c
}

// execOutput reads x to its exit and returns its stdout.
func execOutput(t *testing.T, x *client.ExecConn) string {
	t.Helper()
	var out []byte
	for {
		ev, err := x.Read(t.Context())
		require.NoError(t, err)
		if ev.Exit != nil {
			require.Equal(t, 0, ev.Exit.Code, string(out))
			return string(out)
		}
		out = append(out, ev.Data...)
	}
}

// SendStdin streams a regular file, a pipe or any reader through the side
// channel, byte for byte, its end closing stdin: each is one /write_stdin.
func TestExecSendStdin(t *testing.T) {
	var sides atomic.Int64
	a := startAgent(t, agentConfig{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/write_stdin" && strings.HasPrefix(r.URL.Query().Get("id"), "exec-stdin-") {
				sides.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}})
	c := expectingClient(t, a)
	data := make([]byte, 24<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:]) + "  -\n"
	path := filepath.Join(t.TempDir(), "in")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	for _, tc := range []struct {
		name string
		r    func(t *testing.T) io.Reader
	}{
		{"regular file", func(t *testing.T) io.Reader {
			f, err := os.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"pipe", func(t *testing.T) io.Reader {
			pr, pw, err := os.Pipe()
			require.NoError(t, err)
			t.Cleanup(func() { pr.Close() })
			go func() { _, _ = pw.Write(data); pw.Close() }()
			return pr
		}},
		{"reader", func(t *testing.T) io.Reader { return bytes.NewBuffer(data) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := sides.Load()
			x, err := c.Exec(t.Context(), client.ExecOptions{Cmd: "sha256sum", Stdin: true, StdinRaw: true})
			require.NoError(t, err)
			defer x.Close()
			require.NotEmpty(t, x.StdinID())
			n, err := x.SendStdin(t.Context(), tc.r(t))
			require.NoError(t, err)
			assert.Equal(t, int64(len(data)), n)
			assert.Equal(t, want, execOutput(t, x))
			assert.Equal(t, before+1, sides.Load())
		})
	}
}

// Without a side channel, or when its request is refused before its
// body (here a 404: an id the agent does not know), SendStdin takes none of the reader (ErrStdinUnsent), and
// WriteStdin sends it all.
func TestExecSendStdinFallsBack(t *testing.T) {
	a := startAgent(t, agentConfig{})
	c := expectingClient(t, a)
	for _, raw := range []bool{false, true} {
		x, err := c.Exec(t.Context(), client.ExecOptions{Cmd: "cat", Stdin: true, StdinRaw: raw})
		require.NoError(t, err)
		defer x.Close()
		assert.Equal(t, raw, x.StdinID() != "")
		if raw {
			client.SetStdinID(x, "exec-stdin-unknown")
		}
		pr, pw := io.Pipe()
		go func() { _, _ = pw.Write([]byte("all of it")); pw.Close() }()
		_, err = x.SendStdin(t.Context(), pr)
		require.True(t, errors.Is(err, client.ErrStdinUnsent), "%v", err)
		rest, err := io.ReadAll(pr)
		require.NoError(t, err)
		require.Equal(t, "all of it", string(rest), "SendStdin read some")
		require.NoError(t, x.WriteStdin(t.Context(), rest))
		require.NoError(t, x.CloseStdin(t.Context()))
		assert.Equal(t, "all of it", execOutput(t, x))
	}
}

// With WithSplicedStdin, a pipe goes on a connection of its own, spliced
// into the socket: every byte arrives; a refusal before the body takes
// none of the pipe (ErrStdinUnsent); a command that ends before its
// stdin does ends the request with the agent's 409, as net/http's does,
// and what went in.
func TestExecSendStdinSpliced(t *testing.T) {
	var spliced atomic.Int64
	a := startAgent(t, agentConfig{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/write_stdin" && r.Close && len(r.TransferEncoding) > 0 {
				spliced.Add(1) // net/http's requests keep their connection
			}
			h.ServeHTTP(w, r)
		})
	}})
	c, err := client.New(a.ts.URL, testSecret, client.WithSplicedStdin())
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	pipeOf := func(data []byte) *os.File {
		pr, pw, err := os.Pipe()
		require.NoError(t, err)
		t.Cleanup(func() { pr.Close() })
		go func() { _, _ = pw.Write(data); pw.Close() }()
		return pr
	}

	data := make([]byte, 24<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	x, err := c.Exec(t.Context(), client.ExecOptions{Cmd: "sha256sum", Stdin: true, StdinRaw: true})
	require.NoError(t, err)
	defer x.Close()
	n, err := x.SendStdin(t.Context(), pipeOf(data))
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), n)
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", execOutput(t, x))
	assert.Equal(t, int64(1), spliced.Load(), "the pipe went spliced")

	x, err = c.Exec(t.Context(), client.ExecOptions{Cmd: "cat", Stdin: true, StdinRaw: true})
	require.NoError(t, err)
	defer x.Close()
	client.SetStdinID(x, "exec-stdin-unknown")
	pr := pipeOf([]byte("all of it"))
	_, err = x.SendStdin(t.Context(), pr)
	require.True(t, errors.Is(err, client.ErrStdinUnsent), "%v", err)
	rest, err := io.ReadAll(pr)
	require.NoError(t, err)
	assert.Equal(t, "all of it", string(rest), "SendStdin read some")

	x, err = c.Exec(t.Context(), client.ExecOptions{Cmd: "head -c 10 >/dev/null", Stdin: true, StdinRaw: true})
	require.NoError(t, err)
	defer x.Close()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	feeding := make(chan struct{})
	go func() { // more than the command takes, until SendStdin is done
		defer close(feeding)
		defer pw.Close()
		chunk := make([]byte, 64<<10)
		for i := 0; i < 4096; i++ {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	n, err = x.SendStdin(t.Context(), pr)
	pr.Close() // the feeder's writes fail from here
	<-feeding
	var e *client.Error // as without splicing: the agent's 409, with what went in
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusConflict, e.StatusCode)
	assert.Less(t, n, int64(4096*64<<10), "the command took part, and the request ended with it")
	assert.Equal(t, int64(3), spliced.Load())
}

// An empty file (or one read to its end) goes as no body at all, and
// leaves no descriptor behind: the duplicate a file's body is sent from
// is made only for a body there is.
func TestExecSendStdinEmptyFile(t *testing.T) {
	a := startAgent(t, agentConfig{})
	c := expectingClient(t, a)
	path := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	opens := func() int { // descriptors of this process open on the file
		des, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		n := 0
		for _, de := range des {
			if target, err := os.Readlink("/proc/self/fd/" + de.Name()); err == nil && target == path {
				n++
			}
		}
		return n
	}
	x, err := c.Exec(t.Context(), client.ExecOptions{Cmd: "wc -c", Stdin: true, StdinRaw: true})
	require.NoError(t, err)
	defer x.Close()
	// No collection meanwhile: a leaked *os.File would be closed by its
	// finalizer, and the leak hidden.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	n, err := x.SendStdin(t.Context(), f)
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	assert.Equal(t, "0\n", execOutput(t, x))
	assert.Equal(t, 1, opens(), "only f is open on the file")
}
