package client_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// logText reads the whole log of process id, one line per log event.
func logText(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	var b strings.Builder
	for ev, err := range c.ProcessLogs(t.Context(), id, client.LogsOptions{}) {
		require.NoError(t, err)
		if ev.Type == client.EventLog {
			b.Write(ev.Data)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestRunWithInput(t *testing.T) {
	a := startAgent(t, agentConfig{})
	res, err := a.c.Run(t.Context(), client.Command{Cmd: "python3 -", Input: "print(6*7)"})
	require.NoError(t, err)
	assert.Equal(t, "42\n", res.Stdout)

	_, err = a.c.Run(t.Context(), client.Command{Cmd: "cat", Stdin: true})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusBadRequest, e.StatusCode)
}

func TestWriteStdinAndClose(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: "sha256sum", Input: "head,", Stdin: true})
	require.NoError(t, err)

	data := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 300<<10) // 1.5 MiB, binary
	n, err := a.c.WriteStdin(ctx, p.ID, bytes.NewReader(data))
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), n)
	// A reader of unknown length goes chunked; one that is a Closer is
	// not closed.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("tail"))
		pw.Close()
	}()
	n, err = a.c.WriteStdin(ctx, p.ID, pr)
	require.NoError(t, err)
	assert.Equal(t, int64(4), n)
	require.NoError(t, a.c.CloseStdin(ctx, p.ID))
	require.NoError(t, a.c.CloseStdin(ctx, p.ID))

	sum := sha256.Sum256(append(append([]byte("head,"), data...), "tail"...))
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", logText(t, a.c, p.ID))

	_, err = a.c.WriteStdin(ctx, p.ID, strings.NewReader("late"))
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusConflict, e.StatusCode)
	assert.Equal(t, "process is not running (status: completed)", e.Message)

	_, err = a.c.WriteStdin(ctx, "00000000-0000-0000-0000-000000000000", strings.NewReader("x"))
	assert.True(t, errors.Is(err, client.ErrProcessNotFound), "%v", err)
	err = a.c.CloseStdin(ctx, "00000000-0000-0000-0000-000000000000")
	assert.True(t, errors.Is(err, client.ErrProcessNotFound), "%v", err)
}

// An error after part of the data went in says how much did.
func TestWriteStdinReportsWhatWentIn(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: "head -c 10 >/dev/null; exec 0<&-; sleep 30", Stdin: true})
	require.NoError(t, err)
	// More than the pipe can hold without a reader (a spliced pipe takes
	// whole socket fragments, about 6 MiB): with 4 MiB, the write could
	// end before the process closed its stdin.
	const size = 16 << 20
	n, err := a.c.WriteStdin(ctx, p.ID, bytes.NewReader(make([]byte, size)))
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusConflict, e.StatusCode)
	assert.Positive(t, n)
	assert.Less(t, n, int64(size))
	require.NoError(t, a.c.KillProcess(ctx, p.ID, ""))
}

// A regular file goes with its Content-Length (which lets the agent
// splice it), from where it stands, and is not closed.
func TestWriteStdinFromFile(t *testing.T) {
	var mu sync.Mutex
	var lengths []int64
	a := startAgent(t, agentConfig{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/write_stdin" {
				mu.Lock()
				lengths = append(lengths, r.ContentLength)
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}})
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: "sha256sum", Stdin: true})
	require.NoError(t, err)
	data := bytes.Repeat([]byte("file data\n"), 300<<10) // 3 MiB
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(100, io.SeekStart)
	require.NoError(t, err)

	n, err := a.c.WriteStdin(ctx, p.ID, f)
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)-100), n)
	_, err = f.Stat()
	assert.NoError(t, err, "WriteStdin closed the file")
	require.NoError(t, a.c.CloseStdin(ctx, p.ID))
	sum := sha256.Sum256(data[100:])
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", logText(t, a.c, p.ID))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int64{int64(len(data) - 100)}, lengths)
}
