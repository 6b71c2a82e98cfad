package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// termReader gathers what a TerminalConn reads.
type termReader struct {
	t      *testing.T
	tc     *client.TerminalConn
	out    strings.Builder
	missed uint64
	exit   *int
	err    error
}

// until reads until cond holds of the output, or the connection ends, or
// 10 s pass.
func (r *termReader) until(cond func(string) bool) bool {
	ctx, cancel := context.WithTimeout(r.t.Context(), 10*time.Second)
	defer cancel()
	for !cond(r.out.String()) {
		if r.err != nil {
			return false
		}
		ev, err := r.tc.Read(ctx)
		switch {
		case err != nil:
			r.err = err
		case ev.Exit != nil:
			r.exit = ev.Exit
		case ev.Missed > 0:
			r.missed += ev.Missed
		default:
			r.out.Write(ev.Output)
		}
	}
	return true
}

func (r *termReader) waitFor(s string) {
	r.t.Helper()
	require.True(r.t, r.until(func(out string) bool { return strings.Contains(out, s) }), "waiting for %q in %q: %v", s, r.out.String(), r.err)
}

func (r *termReader) toEnd() {
	r.t.Helper()
	r.until(func(string) bool { return false })
	require.ErrorIs(r.t, r.err, io.EOF, "output %q", r.out.String())
	require.NotNil(r.t, r.exit)
}

func attach(t *testing.T, c *client.Client, id string, since int64) *termReader {
	t.Helper()
	tc, err := c.AttachTerminal(t.Context(), id, since)
	require.NoError(t, err)
	t.Cleanup(func() { tc.Close() })
	return &termReader{t: t, tc: tc}
}

func TestTerminal(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	term, err := a.c.StartTerminal(ctx, client.TerminalOptions{Env: map[string]string{"PS1": "$ "}, Cols: 100, Rows: 30})
	require.NoError(t, err)
	assert.Equal(t, client.StatusRunning, term.Status)
	assert.Positive(t, term.PID)

	r := attach(t, a.c, term.ID, -1)
	require.NoError(t, r.tc.Write(ctx, []byte("echo $((6*7)); stty size\n")))
	r.waitFor("42\r\n30 100\r\n")

	require.NoError(t, r.tc.Resize(ctx, 132, 43))
	require.Eventually(t, func() bool {
		ts, err := a.c.ListTerminals(ctx)
		return err == nil && len(ts) == 1 && ts[0].Cols == 132
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, r.tc.Write(ctx, []byte("stty size\n")))
	r.waitFor("43 132\r\n")
	require.NoError(t, a.c.ResizeTerminal(ctx, term.ID, 90, 20))
	require.NoError(t, r.tc.Write(ctx, []byte("stty size\n")))
	r.waitFor("20 90\r\n")

	ts, err := a.c.ListTerminals(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, client.Terminal{ID: term.ID, PID: term.PID, Status: client.StatusRunning, Command: ts[0].Command,
		Cols: 90, Rows: 20, Clients: 1}, ts[0])

	require.NoError(t, r.tc.Write(ctx, []byte("sleep 100\n")))
	// An interrupt before the shell has started sleep would be the
	// shell's own.
	require.Eventually(t, func() bool { return hasChild(term.PID, "sleep") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.tc.Signal(ctx, "SIGINT"))
	require.NoError(t, r.tc.Write(ctx, []byte("echo back\n")))
	r.waitFor("back\r\n")

	require.NoError(t, a.c.KillTerminal(ctx, term.ID, ""))
	r.toEnd()
	assert.Equal(t, 137, *r.exit)
	ts, err = a.c.ListTerminals(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.StatusKilled, ts[0].Status)
	require.NotNil(t, ts[0].ExitCode)
	assert.Equal(t, 137, *ts[0].ExitCode)
}

// hasChild reports whether pid has a child named name.
func hasChild(pid int, name string) bool {
	p := "/proc/" + strconv.Itoa(pid)
	b, _ := os.ReadFile(p + "/task/" + strconv.Itoa(pid) + "/children")
	for f := range strings.FieldsSeq(string(b)) {
		if comm, _ := os.ReadFile("/proc/" + f + "/comm"); strings.TrimSpace(string(comm)) == name {
			return true
		}
	}
	return false
}

// A reader that closes while output flows and attaches again at Offset
// gets every byte exactly once.
func TestTerminalResume(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	const n = 100000
	term, err := a.c.StartTerminal(ctx, client.TerminalOptions{Cmd: "read x; seq 1 " + strconv.Itoa(n)})
	require.NoError(t, err)
	r := attach(t, a.c, term.ID, -1)
	require.NoError(t, r.tc.Write(ctx, []byte("\n")))
	require.True(t, r.until(func(out string) bool { return len(out) > 100<<10 }))
	require.NoError(t, r.tc.Close())
	first := r.out.String()
	since := r.tc.Offset()
	assert.Equal(t, uint64(len(first)), since)

	r2 := attach(t, a.c, term.ID, int64(since))
	r2.toEnd()
	assert.Zero(t, r2.missed)
	assert.Equal(t, 0, *r2.exit)
	var want strings.Builder
	want.WriteString("\r\n")
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i) + "\r\n")
	}
	assert.True(t, want.String() == first+r2.out.String(), "every byte exactly once: want %d bytes, got %d",
		want.Len(), len(first)+r2.out.Len())
}

// A reader that resumes at Offset after the agent's 1 MiB ring has
// evicted part of what it did not get reads a Missed event for exactly
// those bytes, then every kept byte once; Offset stays right across
// further resumes.
func TestTerminalResumeAfterEviction(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	// Part one, 109 KB, is read whole however slow the reader; part two,
	// 2.2 MB, twice the ring and more, is written with nobody reading.
	const one, n, ring = 20000, 300000, 1 << 20
	term, err := a.c.StartTerminal(ctx, client.TerminalOptions{Cmd: fmt.Sprintf("read x; seq 1 %d; read y; seq %d %d", one, one+1, n)})
	require.NoError(t, err)
	var want strings.Builder
	want.WriteString("\r\n")
	for i := 1; i <= n; i++ {
		if i == one+1 {
			want.WriteString("\r\n") // the second line typed, echoed
		}
		want.WriteString(strconv.Itoa(i) + "\r\n")
	}
	total := uint64(want.Len())

	r := attach(t, a.c, term.ID, -1)
	require.NoError(t, r.tc.Write(ctx, []byte("\n")))
	require.True(t, r.until(func(out string) bool { return strings.HasSuffix(out, "\n"+strconv.Itoa(one)+"\r\n") }))
	require.NoError(t, r.tc.Close())
	typer := attach(t, a.c, term.ID, -1)
	require.NoError(t, typer.tc.Write(ctx, []byte("\n")))
	require.NoError(t, typer.tc.Close())
	require.Eventually(t, func() bool {
		ts, err := a.c.ListTerminals(ctx)
		return err == nil && len(ts) == 1 && ts[0].Status != client.StatusRunning
	}, 10*time.Second, 10*time.Millisecond, "seq ran to its end, past the ring")

	r2 := attach(t, a.c, term.ID, int64(r.tc.Offset()))
	require.True(t, r2.until(func(out string) bool { return len(out) > 32<<10 }))
	require.NoError(t, r2.tc.Close())
	assert.Equal(t, total-ring-r.tc.Offset(), r2.missed, "missed: what was evicted after the first reader's last byte")
	assert.Equal(t, r.tc.Offset()+r2.missed+uint64(r2.out.Len()), r2.tc.Offset())

	r3 := attach(t, a.c, term.ID, int64(r2.tc.Offset()))
	r3.toEnd()
	assert.Zero(t, r3.missed)
	assert.Equal(t, 0, *r3.exit)
	assert.Equal(t, total, r3.tc.Offset(), "the end of the stream")
	w := want.String()
	assert.True(t, w[:len(r.out.String())] == r.out.String(), "the first reader's bytes")
	assert.True(t, w[total-ring:] == r2.out.String()+r3.out.String(), "every kept byte exactly once: want %d bytes, got %d",
		ring, r2.out.Len()+r3.out.Len())
}

func TestTerminalErrors(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	_, err := a.c.AttachTerminal(ctx, "nope", -1)
	var e *client.Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, http.StatusNotFound, e.StatusCode)
	assert.Equal(t, "terminal not found: nope", e.Message)

	term, err := a.c.StartTerminal(ctx, client.TerminalOptions{Cmd: "exit 5"})
	require.NoError(t, err)
	_, err = a.c.AttachTerminal(ctx, term.ID, 1<<40)
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, http.StatusBadRequest, e.StatusCode)

	r := attach(t, a.c, term.ID, 0)
	r.toEnd()
	assert.Equal(t, 5, *r.exit)
	err = a.c.ResizeTerminal(ctx, term.ID, 10, 10)
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, http.StatusConflict, e.StatusCode)
	err = a.c.KillTerminal(ctx, "nope", "")
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, http.StatusNotFound, e.StatusCode)
	_, err = a.c.StartTerminal(ctx, client.TerminalOptions{Cols: 5000})
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, http.StatusBadRequest, e.StatusCode)
}
