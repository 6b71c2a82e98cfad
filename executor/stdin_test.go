package executor

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunInput(t *testing.T) {
	var r Runner
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: more than a pipe holds
	tests := []struct{ cmd, input, stdout string }{
		{"python3 -", "print(6*7)", "42\n"},
		{"cat", "no newline", "no newline"},
		{"cat", big, big},
		{"wc -c", big, "1048576\n"},
		{"cat; echo end", "", "end\n"}, // empty input: /dev/null, EOF at once
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			out, err := r.Run(t.Context(), Command{Cmd: tt.cmd, Input: tt.input})
			require.NoError(t, err)
			assert.Equal(t, 0, out.Code, "%s", out.Stderr)
			assert.True(t, tt.stdout == string(out.Stdout), "stdout: %.100q", out.Stdout)
		})
	}
}

// A command that never reads its input ends, and Run returns, however
// large the input: the writer gets EPIPE, or is ended with the command.
func TestRunInputNeverRead(t *testing.T) {
	var r Runner
	input := strings.Repeat("x", 10<<20)
	for _, cmd := range []string{"true", "echo done", "exec 0<&-; sleep 0.2; echo done"} {
		out, err := r.Run(t.Context(), Command{Cmd: cmd, Input: input})
		require.NoError(t, err, cmd)
		assert.Equal(t, 0, out.Code, cmd)
	}
	// Its stdin held by a background child that never reads: the write
	// ends with the command, after the drain delay.
	r2 := Runner{DrainDelay: 100 * time.Millisecond}
	var col collector
	p, err := r2.Start(t.Context(), Command{Cmd: "sleep 30 <&0 >/dev/null 2>&1 & echo started", Input: input}, col.add)
	require.NoError(t, err)
	assert.Equal(t, 0, p.Wait().Code)
	assert.Equal(t, []string{"started"}, col.get(Stdout))
	require.NoError(t, p.Signal(syscall.SIGKILL)) // the sleep left in its group
}

// A command that waits for its input while the caller gives up: Run
// returns once the context ends, and the input writer with it.
func TestRunInputCancelled(t *testing.T) {
	var r Runner
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	out, err := r.Run(ctx, Command{Cmd: "sleep 30", Input: strings.Repeat("x", 4<<20)})
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGKILL), out.Code)
}

func startCat(t *testing.T, r *Runner, c Command) (*Process, *collector) {
	t.Helper()
	var col collector
	p, err := r.Start(t.Context(), c, col.add)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGKILL)
		p.Wait()
	})
	return p, &col
}

func TestWriteStdinAfterInputThenClose(t *testing.T) {
	var r Runner
	p, col := startCat(t, &r, Command{Cmd: "cat; echo eof", Input: "first\n", Stdin: true})
	n, err := p.WriteStdin(t.Context(), strings.NewReader("second\nthi"), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
	n, err = p.WriteStdin(t.Context(), bytes.NewReader([]byte("rd\n")), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	require.NoError(t, p.CloseStdin())
	require.NoError(t, p.CloseStdin()) // idempotent
	assert.Equal(t, 0, p.Wait().Code)
	assert.Equal(t, []string{"first", "second", "third", "eof"}, col.get(Stdout))

	_, err = p.WriteStdin(t.Context(), strings.NewReader("late"), 0)
	assert.ErrorIs(t, err, ErrStdinClosed)
	assert.ErrorIs(t, err, ErrFinished)
	assert.NoError(t, p.CloseStdin()) // after the end too
}

func TestWriteStdinRefusedWithoutStdin(t *testing.T) {
	var r Runner
	for _, c := range []Command{{Cmd: "cat"}, {Cmd: "cat", Input: "x"}} {
		p, _ := startCat(t, &r, c)
		_, err := p.WriteStdin(t.Context(), strings.NewReader("y"), 0)
		assert.ErrorIs(t, err, ErrNoStdin)
		assert.ErrorIs(t, p.CloseStdin(), ErrNoStdin)
		p.Wait()
	}
}

// A write to a command that does not read blocks only that write: it ends
// when its context does, a second writer waiting for the lock gives up
// with its own context, and a close or a kill still works.
func TestWriteStdinToCommandThatDoesNotRead(t *testing.T) {
	var r Runner
	p, _ := startCat(t, &r, Command{Cmd: "sleep 30", Stdin: true})
	payload := strings.Repeat("z", 4<<20) // more than the pipe holds

	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		n   int64
		err error
	}
	first := make(chan result, 1)
	go func() {
		n, err := p.WriteStdin(ctx, strings.NewReader(payload), 0)
		first <- result{n, err}
	}()
	// The second writer waits for the lock, then gives up.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	waitWriting(t, p)
	_, err := p.WriteStdin(ctx2, strings.NewReader("other"), 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	cancel()
	res := <-first
	assert.ErrorIs(t, res.err, context.Canceled)
	assert.Less(t, res.n, int64(len(payload)))

	// With a stall time, a writer gives up by itself.
	_, err = p.WriteStdin(t.Context(), strings.NewReader(payload), 50*time.Millisecond)
	assert.ErrorIs(t, err, ErrStdinStalled)

	// A writer blocked for good; close does not wait for it, and the kill
	// ends it.
	blocked := make(chan result, 1)
	go func() {
		n, err := p.WriteStdin(t.Context(), strings.NewReader(payload), 0)
		blocked <- result{n, err}
	}()
	waitWriting(t, p)
	require.NoError(t, p.CloseStdin())
	_, err = p.WriteStdin(t.Context(), strings.NewReader("after close"), 0)
	assert.ErrorIs(t, err, ErrStdinClosed)
	require.NoError(t, p.Signal(syscall.SIGKILL))
	res = <-blocked
	assert.ErrorIs(t, res.err, ErrStdinClosed) // EPIPE, or closed at the end
	p.Wait()
}

// waitWriting waits until a writer holds p's stdin lock.
func waitWriting(t *testing.T, p *Process) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.stdin.mu.Lock()
		defer p.stdin.mu.Unlock()
		return p.stdin.writing
	}, 5*time.Second, 5*time.Millisecond)
}

// EPIPE: the command stopped reading and exited.
func TestWriteStdinAfterCommandClosedIt(t *testing.T) {
	var r Runner
	p, col := startCat(t, &r, Command{Cmd: "head -c 5; exec 0<&-; echo; sleep 30", Stdin: true})
	n, err := p.WriteStdin(t.Context(), strings.NewReader(strings.Repeat("a", 4<<20)), 0)
	assert.ErrorIs(t, err, ErrStdinClosed)
	assert.Less(t, n, int64(4<<20))
	require.Eventually(t, func() bool { return len(col.get(Stdout)) == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"aaaaa"}, col.get(Stdout))
}

// Writes from concurrent callers never interleave: each payload comes out
// of cat in one piece.
func TestWriteStdinConcurrentWritesDoNotInterleave(t *testing.T) {
	var r Runner
	p, col := startCat(t, &r, Command{Cmd: "cat", Stdin: true})
	const writers, lines = 8, 20000 // about 250 KiB each: several pipe-fulls
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var b strings.Builder
			for i := range lines {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
			}
			n, err := p.WriteStdin(t.Context(), strings.NewReader(b.String()), 0)
			assert.NoError(t, err)
			assert.Equal(t, int64(b.Len()), n)
		})
	}
	wg.Wait()
	require.NoError(t, p.CloseStdin())
	p.Wait()
	got := col.get(Stdout)
	require.Len(t, got, writers*lines)
	for at := 0; at < len(got); at += lines {
		var w int
		_, err := fmt.Sscanf(got[at], "w%d-0", &w)
		require.NoError(t, err, got[at])
		for i := range lines {
			require.Equal(t, fmt.Sprintf("w%d-%d", w, i), got[at+i], "line %d", at+i)
		}
	}
}
