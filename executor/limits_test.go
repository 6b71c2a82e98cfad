package executor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestMaxRunning(t *testing.T) {
	r := Runner{MaxRunning: 2}
	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	nop := func(Stream, time.Time, [][]byte) {}
	p1, err := r.Start(ctx1, Command{Cmd: "sleep 100"}, nop)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	p2, err := r.Start(ctx2, Command{Cmd: "sleep 100"}, nop)
	require.NoError(t, err)

	_, err = r.Start(t.Context(), Command{Cmd: "true"}, nop)
	assert.ErrorIs(t, err, ErrBusy)
	_, err = r.Run(t.Context(), Command{Cmd: "true"})
	assert.ErrorIs(t, err, ErrBusy)
	running, limit := r.Running()
	assert.Equal(t, 2, running, "refused commands take no slot")
	assert.Equal(t, 2, limit)

	cancel1()
	p1.Wait() // the slot is free once Wait returns
	running, _ = r.Running()
	assert.Equal(t, 1, running)
	out, err := r.Run(t.Context(), Command{Cmd: "echo again"})
	require.NoError(t, err)
	assert.Equal(t, "again\n", string(out.Stdout))
	cancel2()
	p2.Wait()
}

func TestDefaultMaxRunning(t *testing.T) {
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	n := defaultMaxRunning()
	assert.LessOrEqual(t, n, 2000)
	assert.LessOrEqual(t, uint64(n), max(lim.Cur/8, 16))
}

// A command's children start with a higher oom_score_adj than the agent,
// so that the kernel kills them first.
func TestCommandsGetHigherOOMScoreAdj(t *testing.T) {
	own := readOOMScoreAdj(t, "self")
	if own >= 1000 {
		t.Skip("the test process's oom_score_adj is already 1000")
	}
	var r Runner
	fifo := filepath.Join(t.TempDir(), "go")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	var c collector
	// The grandchild (cat) is forked only once the test writes to the
	// fifo, after Start has returned: by then the shell's value is set.
	p, err := r.Start(t.Context(), Command{Cmd: "read x < " + fifo + "; cat /proc/self/oom_score_adj"}, c.add)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fifo, []byte("go\n"), 0))
	res := p.Wait()
	require.Equal(t, 0, res.Code, "%v", c.get(Stderr))
	lines := c.get(Stdout)
	require.Len(t, lines, 1)
	got, err := strconv.Atoi(lines[0])
	require.NoError(t, err)
	assert.Equal(t, min(1000, own+500), got)

	// Negative turns it off.
	r2 := Runner{OOMScoreAdj: -1}
	out, err := r2.Run(t.Context(), Command{Cmd: "cat /proc/self/oom_score_adj"})
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(own), strings.TrimSpace(string(out.Stdout)))
}

func readOOMScoreAdj(t *testing.T, pid string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/oom_score_adj")
	if err != nil {
		t.Skipf("no oom_score_adj: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}

// What execve refuses as too big is the request's fault, named as such.
func TestOversizedCommands(t *testing.T) {
	var r Runner
	big := strings.Repeat("x", maxArgStrlen)
	for _, c := range []Command{
		{Cmd: "true #" + big},
		{Cmd: "true", Env: map[string]string{"BIG": big}},
		{Cmd: "true", Env: map[string]string{"B": big[:maxArgStrlen-2]}}, // "B=" plus the NUL make one too many
	} {
		_, err := r.Run(t.Context(), c)
		require.ErrorIs(t, err, ErrInvalidCommand)
		assert.Contains(t, err.Error(), "limit")
	}
	// Just under the limit is fine.
	_, err := r.Run(t.Context(), Command{Cmd: "true", Env: map[string]string{"B": big[:maxArgStrlen-3]}})
	require.NoError(t, err)

	// Each entry fits but all of them do not: the kernel caps the total
	// at 6 MiB at most, whatever the stack limit.
	env := map[string]string{}
	for i := range 60 {
		env["E"+strconv.Itoa(i)] = big[:120<<10]
	}
	_, err = r.Run(t.Context(), Command{Cmd: "true", Env: env})
	require.ErrorIs(t, err, ErrInvalidCommand)
	assert.Contains(t, err.Error(), "E2BIG")
}

// A shell that cannot be executed is the agent's fault, not the
// request's, though execve says EACCES as a forbidden cwd would.
func TestUnexecutableShellIsNotAClientError(t *testing.T) {
	shell := filepath.Join(t.TempDir(), "sh")
	require.NoError(t, os.WriteFile(shell, []byte("#!/bin/sh\n"), 0o644))
	r := Runner{Shell: shell}
	_, err := r.Run(t.Context(), Command{Cmd: "true", Dir: t.TempDir()})
	require.ErrorIs(t, err, syscall.EACCES)
	assert.NotErrorIs(t, err, ErrInvalidDir)
	assert.NotErrorIs(t, err, ErrInvalidCommand)
}

// helperEnv, when set, makes the test binary run a helper instead of the
// tests; see TestMain.
const helperEnv = "EXECUTOR_TEST_HELPER"

// runHelper runs the helper named by helperEnv and exits.
func runHelper(name string) {
	switch name {
	case "forbidden-cwd":
		// As a user that may not enter os.Args[1]: Run must refuse the
		// directory up front, and the start error must map the same way.
		dir := os.Getenv("EXECUTOR_TEST_DIR")
		var r Runner
		_, err := r.Run(context.Background(), Command{Cmd: "true", Dir: dir})
		if !errors.Is(err, ErrInvalidDir) || !strings.Contains(err.Error(), "permission denied") {
			os.Stdout.WriteString("Run: " + errString(err) + "\n")
			os.Exit(1)
		}
		err = startError(Command{Cmd: "true", Dir: dir}, &os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: syscall.EACCES})
		if !errors.Is(err, ErrInvalidDir) {
			os.Stdout.WriteString("startError: " + errString(err) + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("ok\n")
		os.Exit(0)
	}
	os.Stdout.WriteString("unknown helper " + name + "\n")
	os.Exit(2)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A cwd the agent may not enter is the request's fault (400), found before
// the start and also if the start's chdir is what fails. Root may enter
// anything, so the check runs in a copy of the test binary as nobody.
func TestForbiddenCwdIsInvalidDir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the helper as another user")
	}
	base := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	require.NoError(t, os.Chmod(base, 0o755))
	bin := filepath.Join(base, "helper")
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, self, 0o755))
	locked := filepath.Join(base, "locked")
	require.NoError(t, os.Mkdir(locked, 0o700))

	for _, dir := range []string{locked, filepath.Join(locked, "sub")} {
		if dir != locked {
			require.NoError(t, os.Mkdir(dir, 0o777))
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), helperEnv+"=forbidden-cwd", "EXECUTOR_TEST_DIR="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", dir, out)
		assert.Equal(t, "ok\n", string(out))
	}
}

// After the shell has exited, Signal still reaches the children it left
// in its group, and reports ErrFinished once there are none.
func TestSignalAfterFinishReachesLeftovers(t *testing.T) {
	var r Runner
	var c collector
	p, err := r.Start(t.Context(), Command{Cmd: "sleep 100 >/dev/null 2>&1 & echo $!"}, c.add)
	require.NoError(t, err)
	res := p.Wait()
	require.Equal(t, 0, res.Code)
	lines := c.get(Stdout)
	require.Len(t, lines, 1)
	pid, err := strconv.Atoi(lines[0])
	require.NoError(t, err)
	require.True(t, testutil.Alive(pid))

	require.NoError(t, p.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "leftover %d survived", pid)
	// Its zombie stays in the group until init reaps it.
	require.Eventually(t, func() bool { return errors.Is(p.Signal(syscall.SIGTERM), ErrFinished) }, 10*time.Second, 10*time.Millisecond)
}

// KillAll kills what finished commands left behind, /run's included.
func TestKillAllKillsLeftovers(t *testing.T) {
	var r Runner
	out, err := r.Run(t.Context(), Command{Cmd: "sleep 100 >/dev/null 2>&1 & echo $!"})
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout)))
	require.NoError(t, err)
	require.True(t, testutil.Alive(pid))
	// A command that left nothing is forgotten at once.
	_, err = r.Run(t.Context(), Command{Cmd: "true"})
	require.NoError(t, err)
	r.mu.Lock()
	assert.Len(t, r.groups, 1)
	r.mu.Unlock()

	assert.Equal(t, 1, r.KillAll())
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond, "leftover %d survived", pid)
}

// The set of groups stays bounded by the live ones.
func TestGroupsArePruned(t *testing.T) {
	var r Runner
	var pids []int
	for range 100 {
		out, err := r.Run(t.Context(), Command{Cmd: "sleep 0.2 >/dev/null 2>&1 & echo $!"})
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout)))
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 10*time.Second, 10*time.Millisecond)
	}
	r.mu.Lock()
	assert.LessOrEqual(t, len(r.groups), 100)
	r.mu.Unlock()
	// Their zombies go once init reaps them.
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.pruneLocked()
		return len(r.groups) == 0
	}, 10*time.Second, 50*time.Millisecond)
}

// Commands that print nothing hold no pipe-reader buffers while they run.
// Before the readers took a buffer only once the pipe had something, 100
// of them held two buffers of maxLine+readSize (96 KiB) each: the heap
// grew by 20.9 MB under -race (7.4 MB after), beyond the bound of one
// such buffer per command.
func TestIdleCommandsHoldNoReadBuffers(t *testing.T) {
	const n = 100
	r := &Runner{DrainDelay: 100 * time.Millisecond}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	ps := make([]*Process, 0, n)
	t.Cleanup(func() {
		for _, p := range ps {
			_ = p.Signal(syscall.SIGKILL)
			p.Wait()
		}
	})
	var lines atomic.Int64
	for range n {
		p, err := r.Start(t.Context(), Command{Cmd: "echo started; exec sleep 30"},
			func(_ Stream, _ time.Time, l [][]byte) { lines.Add(int64(len(l))) })
		require.NoError(t, err)
		ps = append(ps, p)
	}
	// Once each has printed its line, its readers wait on empty pipes.
	require.Eventually(t, func() bool { return lines.Load() == n }, 10*time.Second, 10*time.Millisecond)
	var grown int64
	assert.Eventually(t, func() bool {
		grown = int64(heap()) - int64(before)
		return grown < int64(n*(r.maxLine()+readSize))
	}, 5*time.Second, 50*time.Millisecond, "heap grew by more than a buffer for each of %d idle commands", n)
	t.Logf("heap grew by %d bytes for %d idle commands", grown, n)
}
