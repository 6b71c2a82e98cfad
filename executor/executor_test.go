package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		RunHelper(os.Args[2:]) // the test binary stands in for the agent's
	}
	if name := os.Getenv(helperEnv); name != "" {
		runHelper(name)
	}
	goleak.VerifyTestMain(m)
}

// collector gathers the lines a command prints, as a LineFunc.
type collector struct {
	mu    sync.Mutex
	lines []string
	by    map[Stream][]string
}

func (c *collector) add(s Stream, _ time.Time, lines [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[Stream][]string{}
	}
	for _, l := range lines {
		c.lines = append(c.lines, string(l))
		c.by[s] = append(c.by[s], string(l))
	}
}

func (c *collector) get(s Stream) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.by[s]...)
}

func TestRunCapturesOutputAndExitCode(t *testing.T) {
	var r Runner
	tests := []struct {
		cmd            string
		stdout, stderr string
		code           int
	}{
		{"echo hello", "hello\n", "", 0},
		{"printf 'a\\r\\nb'", "a\r\nb", "", 0},
		{"echo out; echo err >&2; exit 3", "out\n", "err\n", 3},
		{"kill -TERM $$", "", "", 128 + int(syscall.SIGTERM)},
		{"printf '\\377\\376'", "\xff\xfe", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			out, err := r.Run(t.Context(), Command{Cmd: tt.cmd})
			require.NoError(t, err)
			assert.Equal(t, tt.stdout, string(out.Stdout))
			assert.Equal(t, tt.stderr, string(out.Stderr))
			assert.Equal(t, tt.code, out.Code)
			assert.False(t, out.Truncated)
		})
	}
}

func TestInvalidCommands(t *testing.T) {
	var r Runner
	for _, c := range []Command{
		{Cmd: "echo a\x00b"},
		{Cmd: "true", Env: map[string]string{"A=B": "x"}},
		{Cmd: "true", Env: map[string]string{"": "x"}},
		{Cmd: "true", Env: map[string]string{"A": "x\x00y"}},
	} {
		_, err := r.Run(t.Context(), c)
		assert.ErrorIs(t, err, ErrInvalidCommand, "%+v", c)
		_, err = r.Start(t.Context(), c, func(Stream, time.Time, [][]byte) {})
		assert.ErrorIs(t, err, ErrInvalidCommand, "%+v", c)
	}
}

func TestRunDirAndEnv(t *testing.T) {
	var r Runner
	dir := t.TempDir()
	out, err := r.Run(t.Context(), Command{Cmd: `pwd; echo "$FOO-$HOME"`, Dir: dir, Env: map[string]string{"FOO": "bar", "HOME": "/h"}})
	require.NoError(t, err)
	assert.Equal(t, dir+"\nbar-/h\n", string(out.Stdout))

	_, err = r.Run(t.Context(), Command{Cmd: "true", Dir: dir + "/missing"})
	assert.ErrorIs(t, err, ErrInvalidDir)
	assert.Contains(t, err.Error(), dir+"/missing")
}

// A command that fills stderr far beyond a pipe's 64 KiB while stdout waits
// must not deadlock: both pipes are drained at the same time.
func TestRunDrainsLargeStderr(t *testing.T) {
	var r Runner
	out, err := r.Run(t.Context(), Command{Cmd: "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo done"})
	require.NoError(t, err)
	assert.Equal(t, "done\n", string(out.Stdout))
	assert.Len(t, out.Stderr, 1_000_000)
}

func TestRunBoundsOutputKeepingHeadAndTail(t *testing.T) {
	r := Runner{MaxOutput: 1000}
	out, err := r.Run(t.Context(), Command{Cmd: "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"})
	require.NoError(t, err)
	assert.True(t, out.Truncated)
	s := string(out.Stdout)
	assert.True(t, strings.HasPrefix(s, "START\n"))
	assert.True(t, strings.HasSuffix(s, "\nEND\n"))
	assert.Contains(t, s, "output truncated")
	assert.Less(t, len(s), 1200)
}

func TestStartSplitsLongLinesWithoutStalling(t *testing.T) {
	r := Runner{MaxLine: 1024}
	var c collector
	// 3 MiB on one line, then a normal line: the reader must go on.
	p, err := r.Start(t.Context(), Command{Cmd: "head -c 3145728 /dev/zero | tr '\\0' a; echo; echo after"}, c.add)
	require.NoError(t, err)
	res := p.Wait()
	assert.Equal(t, 0, res.Code)
	lines := c.get(Stdout)
	require.NotEmpty(t, lines)
	assert.Equal(t, "after", lines[len(lines)-1])
	total := 0
	for _, l := range lines[:len(lines)-1] {
		assert.LessOrEqual(t, len(l), 1024)
		total += len(l)
	}
	assert.Equal(t, 3145728, total)
}

func TestStartLinesAndEndings(t *testing.T) {
	var r Runner
	var c collector
	p, err := r.Start(t.Context(), Command{Cmd: "printf 'one\\r\\ntwo\\n\\nlast'; echo err >&2"}, c.add)
	require.NoError(t, err)
	p.Wait()
	assert.Equal(t, []string{"one", "two", "", "last"}, c.get(Stdout))
	assert.Equal(t, []string{"err"}, c.get(Stderr))
}

// startGrandchild starts a command whose shell starts a background sleep
// and reports its pid on stdout, and returns the pid.
func startGrandchild(t *testing.T, r *Runner, ctx context.Context, timeout time.Duration) (*Process, int) {
	t.Helper()
	pidc := make(chan int, 1)
	p, err := r.Start(ctx, Command{Cmd: "sleep 100 & echo $!; echo started; wait", Timeout: timeout}, func(_ Stream, _ time.Time, lines [][]byte) {
		for _, l := range lines {
			if pid, err := strconv.Atoi(string(l)); err == nil {
				pidc <- pid
			}
		}
	})
	require.NoError(t, err)
	select {
	case pid := <-pidc:
		return p, pid
	case <-time.After(5 * time.Second):
		t.Fatal("no grandchild pid")
	}
	return nil, 0
}

func TestCancelKillsWholeGroup(t *testing.T) {
	r := Runner{DrainDelay: 3 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	p, pid := startGrandchild(t, &r, ctx, 0)
	require.True(t, testutil.Alive(pid))

	start := time.Now()
	cancel()
	res := p.Wait()
	// With a leader-only kill, the sleeping grandchild would hold the
	// pipes and Wait would last the whole DrainDelay.
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, 128+int(syscall.SIGKILL), res.Code)
	assert.False(t, res.TimedOut)
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "grandchild %d survived", pid)
}

func TestTimeoutKillsGroupAndKeepsOutput(t *testing.T) {
	var r Runner
	out, err := r.Run(t.Context(), Command{Cmd: "echo before; sleep 100 & echo $! >&2; wait", Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.True(t, out.TimedOut)
	assert.Equal(t, ExitTimedOut, out.Code)
	assert.Equal(t, "before\n", string(out.Stdout))
	pid, err := strconv.Atoi(strings.TrimSpace(string(out.Stderr)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond)
}

// A background child that keeps stdout open must not make Run hang: the
// wait after the shell exits is bounded by DrainDelay.
func TestBackgroundChildHoldingPipesDoesNotHang(t *testing.T) {
	r := Runner{DrainDelay: 300 * time.Millisecond}
	start := time.Now()
	out, err := r.Run(t.Context(), Command{Cmd: "sleep 30 & echo $!; echo bye"})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, 0, out.Code)
	assert.False(t, out.Truncated, "the pipe was empty: nothing was cut")
	lines := strings.Split(strings.TrimSpace(string(out.Stdout)), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, "bye", lines[1])
	pid, err := strconv.Atoi(lines[0])
	require.NoError(t, err)
	_ = syscall.Kill(pid, syscall.SIGKILL) // ours to clean up: completion does not kill background children
}

func TestSignalGroup(t *testing.T) {
	var r Runner
	p, pid := startGrandchild(t, &r, t.Context(), 0)
	require.NoError(t, p.Signal(syscall.SIGTERM))
	res := p.Wait()
	assert.Equal(t, 128+int(syscall.SIGTERM), res.Code)
	assert.Equal(t, syscall.SIGTERM, res.Signal)
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond)
	// The grandchild's zombie stays in the group until init reaps it.
	require.Eventually(t, func() bool { return errors.Is(p.Signal(syscall.SIGKILL), ErrFinished) }, 10*time.Second, 10*time.Millisecond)
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in      string
		max     int
		want    []string
		wantUse int
	}{
		{"a\nb\n", 10, []string{"a", "b"}, 4},
		{"a\r\nb", 10, []string{"a"}, 3},
		{"abcdefghij", 4, []string{"abcd", "efgh"}, 8},
		{"abcdefghij\nx", 4, []string{"abcd", "efgh", "ij"}, 11},
		{"abcd", 4, nil, 0},                                         // exactly max: wait for more
		{"ab\xe2\x82\xaccd", 4, []string{"ab", "\xe2\x82\xacc"}, 6}, // never split the euro sign
	}
	for _, tt := range tests {
		got, used := splitLines(nil, []byte(tt.in), tt.max)
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		assert.Equal(t, tt.want, gs, "input %q", tt.in)
		assert.Equal(t, tt.wantUse, used, "input %q", tt.in)
	}
}

func TestCapture(t *testing.T) {
	c := capture{max: 10}
	c.write([]byte("hello"))
	assert.Equal(t, "hello", string(c.bytes()))
	c.write([]byte("ab"))
	c.write([]byte("cdefghij"))
	assert.Equal(t, int64(5), c.dropped)
	b := c.bytes()
	assert.True(t, bytes.HasPrefix(b, []byte("hello\n[sandbox-executor: output truncated, 5 bytes omitted]\n")))
	assert.True(t, bytes.HasSuffix(b, []byte("fghij")))
}

// The capture keeps the first and last halves of its budget, whatever the
// sizes of the writes, and assembles them without a second copy.
func TestCaptureMatchesReference(t *testing.T) {
	for _, max := range []int{1, 7, 10, 64, 1000} {
		for _, total := range []int{0, 3, max / 2, max, max + 1, 3*max + 5} {
			for _, chunk := range []int{1, 3, max/3 + 1, 2 * max} {
				var all []byte
				c := capture{max: max}
				for len(all) < total {
					n := min(chunk, total-len(all))
					b := make([]byte, n)
					for i := range b {
						b[i] = byte('a' + (len(all)+i)%26)
					}
					all = append(all, b...)
					c.write(b)
				}
				want := all
				if len(all) > max {
					dropped := len(all) - max
					want = append(append([]byte{}, all[:max/2]...),
						fmt.Sprintf("\n[sandbox-executor: output truncated, %d bytes omitted]\n", dropped)...)
					want = append(want, all[len(all)-(max-max/2):]...)
				}
				got := c.bytes()
				require.Equal(t, string(want), string(got), "max %d total %d chunk %d", max, total, chunk)
				if len(got) > 0 && len(c.head) > 0 {
					assert.Same(t, &c.head[0], &got[0], "bytes copied the output")
				}
			}
		}
	}
}
