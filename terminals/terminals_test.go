package terminals

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func newTestRegistry(t *testing.T, opts Options) *Registry {
	t.Helper()
	if opts.DrainDelay == 0 {
		opts.DrainDelay = 300 * time.Millisecond
	}
	r := NewRegistry(&executor.Runner{}, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Close(ctx))
	})
	return r
}

func start(t *testing.T, r *Registry, s Spec) *Terminal {
	t.Helper()
	term, err := r.Start(s)
	require.NoError(t, err)
	return term
}

func waitDone(t *testing.T, term *Terminal) {
	t.Helper()
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("terminal %s did not end", term.ID)
	}
}

// reader follows a cursor and gathers what it reads.
type reader struct {
	c      *Cursor
	out    []byte
	missed uint64
	ended  bool
}

// until reads until cond holds of the output, the terminal has ended and
// everything is read, or 10 s pass; it reports whether cond held.
func (rd *reader) until(cond func(out string) bool) bool {
	buf := make([]byte, 64<<10)
	deadline := time.After(10 * time.Second)
	for {
		n, missed, ended := rd.c.Read(buf)
		rd.out = append(rd.out, buf[:n]...)
		rd.missed += missed
		rd.ended = ended
		if cond(string(rd.out)) {
			return true
		}
		if ended {
			return false
		}
		if n == len(buf) {
			continue
		}
		select {
		case <-rd.c.Wake():
		case <-deadline:
			return false
		}
	}
}

func (rd *reader) waitFor(t *testing.T, s string) {
	t.Helper()
	require.True(t, rd.until(func(out string) bool { return strings.Contains(out, s) }), "waiting for %q; output: %q", s, rd.out)
}

func (rd *reader) toEnd(t *testing.T) string {
	t.Helper()
	rd.until(func(string) bool { return false })
	require.True(t, rd.ended, "the terminal did not end; output: %q", rd.out)
	return string(rd.out)
}

func attach(t *testing.T, term *Terminal, since uint64) *reader {
	t.Helper()
	c, err := term.Attach(since)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &reader{c: c}
}

func typeIn(t *testing.T, term *Terminal, s string) {
	t.Helper()
	_, err := term.Write(t.Context(), []byte(s))
	require.NoError(t, err)
}

func TestShellEcho(t *testing.T) {
	r := newTestRegistry(t, Options{})
	term := start(t, r, Spec{Env: map[string]string{"PS1": "$ "}})
	rd := attach(t, term, 0)
	typeIn(t, term, "echo $((6*7)) $TERM\n")
	rd.waitFor(t, "42 xterm-256color")
	info := term.Info()
	assert.Equal(t, StatusRunning, info.Status)
	assert.Equal(t, 80, info.Cols)
	assert.Equal(t, 24, info.Rows)
	assert.Equal(t, 1, info.Clients)
	assert.Nil(t, info.ExitCode)
	assert.True(t, strings.HasSuffix(info.Command, "sh"), "the login shell: %s", info.Command)

	typeIn(t, term, "exit 7\n")
	rd.toEnd(t)
	waitDone(t, term)
	info = term.Info()
	assert.Equal(t, StatusFailed, info.Status)
	require.NotNil(t, info.ExitCode)
	assert.Equal(t, 7, *info.ExitCode)
	assert.Equal(t, 7, term.ExitCode())
	_, err := term.Write(t.Context(), []byte("x"))
	assert.ErrorIs(t, err, ErrNotRunning)
	assert.ErrorIs(t, term.Resize(10, 10), ErrNotRunning)
}

func TestResize(t *testing.T) {
	r := newTestRegistry(t, Options{})
	term := start(t, r, Spec{Cmd: "stty size; read x; stty size", Cols: 100, Rows: 30})
	rd := attach(t, term, 0)
	rd.waitFor(t, "30 100")
	require.NoError(t, r.Resize(term.ID, 132, 43))
	assert.Equal(t, 132, term.Info().Cols)
	typeIn(t, term, "\n")
	rd.waitFor(t, "43 132")
	assert.ErrorIs(t, r.Resize("nope", 1, 1), ErrNotFound)
}

// Every use of a terminal by a client (input, a resize, a signal, output
// read) is reported to Spec.OnActivity, and nothing else is: a terminal
// that only writes, with no client reading, is not in use.
func TestOnActivity(t *testing.T) {
	r := newTestRegistry(t, Options{})
	var uses atomic.Int64
	term := start(t, r, Spec{Cmd: "read x; echo got-$x; read y", OnActivity: func() { uses.Add(1) }})
	assert.Zero(t, uses.Load(), "starting is no use")
	typeIn(t, term, "a\n")
	assert.Equal(t, int64(1), uses.Load(), "input")
	require.NoError(t, term.Resize(90, 20))
	assert.Equal(t, int64(2), uses.Load(), "a resize")
	require.NoError(t, term.Signal(syscall.SIGWINCH))
	assert.Equal(t, int64(3), uses.Load(), "a signal")
	rd := attach(t, term, 0)
	rd.waitFor(t, "got-a")
	assert.Greater(t, uses.Load(), int64(3), "output read")
	rd.c.Close()
	before := uses.Load()
	require.NoError(t, term.Signal(syscall.SIGKILL))
	waitDone(t, term)
	assert.Equal(t, before+1, uses.Load(), "only the signal: output no client reads is no use")
	assert.ErrorIs(t, term.Resize(90, 20), ErrNotRunning)
	assert.Equal(t, before+1, uses.Load(), "a refused resize is no use")
}

// Ctrl-C typed into the terminal interrupts the foreground job, and so
// does Signal, which an interactive shell survives.
func TestInterrupt(t *testing.T) {
	r := newTestRegistry(t, Options{})
	term := start(t, r, Spec{Cmd: "sleep 100"})
	// Typed before the command runs, a Ctrl-C would reach nobody, or a
	// shell that has yet to start it.
	require.Eventually(t, func() bool { return comm(term.PID) == "sleep" || childrenOf(term.PID) == "sleep" },
		10*time.Second, 10*time.Millisecond)
	typeIn(t, term, "\x03")
	waitDone(t, term)
	assert.Equal(t, 128+int(syscall.SIGINT), term.ExitCode())

	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("the rest needs bash")
	}
	sh := start(t, r, Spec{Env: map[string]string{"SHELL": "/bin/bash", "PS1": "$ "}})
	rd := attach(t, sh, 0)
	typeIn(t, sh, "sleep 100; echo after-$?\n")
	require.Eventually(t, func() bool { return strings.Contains(childrenOf(sh.PID), "sleep") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, sh.Signal(syscall.SIGINT))
	typeIn(t, sh, "echo alive\n")
	rd.waitFor(t, "alive")
	assert.NotContains(t, string(rd.out), "after-1", "the line after the interrupted job does not run")
	assert.Equal(t, StatusRunning, sh.Info().Status)
}

// comm returns the command name of pid.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// childrenOf returns the command names of pid's children.
func childrenOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var names []string
	for f := range strings.FieldsSeq(string(b)) {
		pid, _ := strconv.Atoi(f)
		names = append(names, comm(pid))
	}
	return strings.Join(names, " ")
}

// The session of a killed terminal is gone, every process of it: the
// shell, a job it put in a group of its own, and that job's child.
func TestKillSession(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs bash for job control")
	}
	r := newTestRegistry(t, Options{})
	term := start(t, r, Spec{Env: map[string]string{"SHELL": "/bin/bash", "PS1": "$ "}})
	rd := attach(t, term, 0)
	typeIn(t, term, "sh -c 'sleep 100 & echo kids $$ $!; wait' &\n")
	rd.waitFor(t, "kids ")
	require.True(t, rd.until(func(out string) bool { return kidsRE.MatchString(out) }))
	m := kidsRE.FindStringSubmatch(string(rd.out))
	var kids []int
	for _, s := range m[1:] {
		pid, _ := strconv.Atoi(s)
		kids = append(kids, pid)
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		require.NotEqual(t, term.PID, pgid, "the job is in a group of its own")
	}

	exited, err := r.Kill(t.Context(), term.ID, syscall.SIGKILL)
	require.NoError(t, err)
	assert.False(t, exited)
	waitDone(t, term)
	assert.Equal(t, StatusKilled, term.Info().Status)
	assert.Equal(t, 128+9, term.ExitCode())
	for _, pid := range kids {
		assert.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "pid %d", pid)
	}
	assert.Empty(t, sessionOf(term.PID), "no process of the session is left")
	_, err = r.Kill(t.Context(), term.ID, syscall.SIGKILL)
	assert.ErrorIs(t, err, ErrNotRunning)
	_, err = r.Kill(t.Context(), "nope", syscall.SIGKILL)
	assert.ErrorIs(t, err, ErrNotFound)
}

var kidsRE = regexp.MustCompile(`kids (\d+) (\d+)`)

// sessionOf returns the live processes of session sid.
func sessionOf(sid int) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 3 && f[3] == strconv.Itoa(sid) && f[0] != "Z" {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// A background job that keeps the terminal open after the leader exits
// does not keep the terminal running past DrainDelay; it is still reached
// by Kill, and by Close.
func TestLeftoverJob(t *testing.T) {
	r := newTestRegistry(t, Options{DrainDelay: 200 * time.Millisecond})
	term := start(t, r, Spec{Cmd: "trap '' HUP; sleep 100 & echo $!; exit 3"})
	rd := attach(t, term, 0)
	out := rd.toEnd(t)
	waitDone(t, term)
	assert.Equal(t, 3, term.ExitCode())
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err, "output %q", out)
	require.True(t, testutil.Alive(pid), "the job ignores the hangup")

	exited, err := r.Kill(t.Context(), term.ID, syscall.SIGKILL)
	require.NoError(t, err)
	assert.True(t, exited)
	assert.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, StatusFailed, term.Info().Status, "the leader's own exit stands")
}

func TestCloseKillsLeftovers(t *testing.T) {
	r := NewRegistry(&executor.Runner{}, Options{DrainDelay: 100 * time.Millisecond})
	done := start(t, r, Spec{Cmd: "trap '' HUP; sleep 100 & echo $!"})
	out := attach(t, done, 0).toEnd(t)
	waitDone(t, done)
	leftover, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	running := start(t, r, Spec{Cmd: "sleep 100"})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Close(ctx))
	assert.Equal(t, StatusFailed, running.Info().Status, "killed by Close, not through Kill")
	assert.Eventually(t, func() bool { return !testutil.Alive(leftover) }, 5*time.Second, 10*time.Millisecond)
	_, err = r.Start(Spec{Cmd: "true"})
	assert.ErrorIs(t, err, ErrClosed)
}

func TestBounds(t *testing.T) {
	r := newTestRegistry(t, Options{MaxRunning: 2, MaxFinished: 2, MaxFinishedBytes: 10 << 10})
	a := start(t, r, Spec{Cmd: "read x"})
	start(t, r, Spec{Cmd: "read x"})
	_, err := r.Start(Spec{Cmd: "true"})
	assert.ErrorIs(t, err, ErrTooMany)
	typeIn(t, a, "\n")
	waitDone(t, a)
	// The slot is free once Done is closed: kill then start never sees
	// the cap.
	var ids []string
	for range 3 {
		term := start(t, r, Spec{Cmd: "head -c 6000 /dev/zero | tr '\\0' x"})
		waitDone(t, term)
		ids = append(ids, term.ID)
	}
	require.Eventually(t, func() bool { return len(r.List()) == 3 }, 5*time.Second, 10*time.Millisecond,
		"one running and the two that finished last")
	_, err = r.Get(ids[0])
	assert.ErrorIs(t, err, ErrNotFound)
	older, err := r.Get(ids[1])
	require.NoError(t, err)
	newest, err := r.Get(ids[2])
	require.NoError(t, err)
	assert.Zero(t, older.outputBytes(), "over the byte bound, the older lost its output")
	assert.NotZero(t, newest.outputBytes(), "never the newest")
	assert.Equal(t, strings.Repeat("x", 6000), attach(t, newest, FromOldest).toEnd(t))
	rd := attach(t, older, 0)
	rd.toEnd(t)
	assert.Equal(t, uint64(6000), rd.missed)
}

// Write gives up when its context ends, though the program reads nothing
// and the terminal's input is full; the terminal takes input again after.
func TestWriteUnblocks(t *testing.T) {
	r := newTestRegistry(t, Options{})
	term := start(t, r, Spec{Cmd: "stty raw -echo; echo ready; sleep 100"})
	rd := attach(t, term, 0)
	rd.waitFor(t, "ready")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := term.Write(ctx, make([]byte, 4<<20))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel2()
	_, err = term.Write(ctx2, make([]byte, 64<<10))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "still full: the next writer waits, and gives up too")

	_, err = r.Kill(t.Context(), term.ID, syscall.SIGKILL)
	require.NoError(t, err)
	waitDone(t, term)
	rd.toEnd(t)
}

func TestStartErrors(t *testing.T) {
	r := newTestRegistry(t, Options{})
	_, err := r.Start(Spec{Cmd: "true", Dir: "/no/such/dir"})
	assert.ErrorIs(t, err, executor.ErrInvalidDir)
	_, err = r.Start(Spec{Cmd: "a\x00b"})
	assert.ErrorIs(t, err, executor.ErrInvalidCommand)
	assert.Empty(t, r.List())
}

func TestLoginShell(t *testing.T) {
	fallback := "/bin/sh"
	if _, err := os.Stat("/bin/bash"); err == nil {
		fallback = "/bin/bash"
	}
	r := NewRegistry(&executor.Runner{Env: []string{"SHELL=/bin/sh"}}, Options{})
	assert.Equal(t, "/bin/sh", r.loginShell(nil, nil), "the agent's $SHELL")
	assert.Equal(t, fallback, r.loginShell(map[string]string{"SHELL": "/no/such/shell"}, nil), "the request's $SHELL first")
	assert.Equal(t, fallback, r.loginShell(nil, []string{"SHELL=/no/such/shell"}), "a session's $SHELL before the agent's")
	r = NewRegistry(&executor.Runner{Env: []string{}}, Options{})
	assert.Equal(t, fallback, r.loginShell(nil, nil))
	assert.Equal(t, "/bin/sh", r.loginShell(nil, []string{"SHELL=/bin/sh"}), "a session's $SHELL")
}
