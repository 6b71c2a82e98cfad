package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

// setSubreaper makes the test process adopt orphaned descendants, as PID
// 1 would, until the test ends.
func setSubreaper(t *testing.T) {
	t.Helper()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

func TestReaperReapsOrphansButNotOurChildren(t *testing.T) {
	setSubreaper(t)
	reaper := NewReaper()
	reaper.MinInterval = time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); reaper.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	r := Runner{Reaper: reaper}
	// The shell exits at once; its background child is orphaned to us and
	// becomes our zombie when it exits.
	out, err := r.Run(t.Context(), Command{Cmd: "sleep 0.1 & echo $!"})
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(orphan))
		return os.IsNotExist(err)
	}, 5*time.Second, 5*time.Millisecond, "orphan %d was not reaped", orphan)

	// Meanwhile every command's own exit status reaches os/exec: the
	// reaper never steals a child that Run waits for.
	var runs sync.WaitGroup
	for i := 0; i < 40; i++ {
		runs.Add(1)
		go func() {
			defer runs.Done()
			out, err := r.Run(t.Context(), Command{Cmd: "sleep 0.01 & exit " + strconv.Itoa(i%7)})
			if assert.NoError(t, err) {
				assert.Equal(t, i%7, out.Code)
			}
		}()
	}
	runs.Wait()
}

// zombie reports whether pid is a child of this process that has exited
// and not been reaped; gone reports whether it is no child at all any
// more (reaped). Neither reaps it.
func zombie(pid int) (zombie, gone bool) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, syscall.ECHILD) {
		return false, true
	}
	return err == nil && siginfoPid(&info) == pid, false
}

// TestReaperResumesAfterOurZombie: waitid shows one zombie at a time, so
// a zombie of ours, which os/exec is about to reap, hides the orphans
// behind it; Done must reap them, since no further SIGCHLD may come.
func TestReaperResumesAfterOurZombie(t *testing.T) {
	setSubreaper(t)
	// waitid looks at the calling thread's children first: with ours
	// forked on this thread and Reap called from it, ours comes first.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	reaper := NewReaper()
	ours := exec.Command("/bin/sh", "-c", "exit 0")
	require.NoError(t, reaper.Start(ours))
	require.Eventually(t, func() bool { z, _ := zombie(ours.Process.Pid); return z }, 5*time.Second, time.Millisecond)

	var out bytes.Buffer
	maker := exec.Command("/bin/sh", "-c", "sleep 0.05 >/dev/null 2>&1 & echo $!")
	maker.Stdout = &out
	require.NoError(t, reaper.Start(maker))
	require.NoError(t, maker.Wait())
	reaper.Done(maker.Process.Pid)
	orphan, err := strconv.Atoi(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	require.Eventually(t, func() bool { z, _ := zombie(orphan); return z }, 5*time.Second, time.Millisecond,
		"orphan %d did not become our zombie", orphan)

	reaper.Reap()
	z, _ := zombie(orphan)
	require.True(t, z, "precondition: the pass stops at our zombie, before orphan %d", orphan)
	z, _ = zombie(ours.Process.Pid)
	require.True(t, z, "the reaper took the exit status of a child os/exec waits for")

	require.NoError(t, ours.Wait())
	reaper.Done(ours.Process.Pid)
	_, gone := zombie(orphan)
	assert.True(t, gone, "orphan %d still a zombie after Done of the child it waited behind", orphan)
}

// pid1Helper names the environment variable that makes
// TestReaperPID1Helper run: in the child that TestReaperAsPID1 starts as
// PID 1 of a new PID namespace.
const pid1Helper = "EXECUTOR_TEST_REAPER_PID1"

// pid1Result is what TestReaperPID1Helper reports on stdout, on one line
// after pid1ResultPrefix.
type pid1Result struct {
	Pid      int      // the helper's pid, in its namespace: 1
	ProcSelf string   // what /proc/self names: the helper's pid in the outer namespace
	Codes    []int    // the exit codes that os/exec delivered, one per command
	Orphans  []int    // the orphans the commands left
	Zombies  []int    // orphans still zombies when the helper gave up on them
	Errors   []string // anything else that went wrong
}

const pid1ResultPrefix = "REAPER-PID1-RESULT "

// TestReaperAsPID1 is the regression test for the reaper as PID 1 of a
// PID namespace without its own /proc: scanning /proc found no zombies,
// since /proc showed the outer namespace, and 400 piled up. The test
// binary is run again as PID 1 of a new PID namespace, with /proc left
// as it is, which is exactly that setup.
func TestReaperAsPID1(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to create a PID namespace (CLONE_NEWPID)")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Killing the helper, PID 1 of its namespace, kills everything in it.
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestReaperPID1Helper$", "-test.count=1", "-test.timeout=50s")
	cmd.Env = append(os.Environ(), pid1Helper+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			t.Skipf("cannot create a PID namespace here: %v", err)
		}
		require.NoError(t, err)
	}
	err = cmd.Wait()
	require.NoError(t, err, "helper failed\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)

	var res pid1Result
	found := false
	for line := range strings.Lines(stdout.String()) {
		if rest, ok := strings.CutPrefix(line, pid1ResultPrefix); ok {
			require.NoError(t, json.Unmarshal([]byte(rest), &res))
			found = true
		}
	}
	require.True(t, found, "no result from the helper\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	require.Equal(t, 1, res.Pid, "the helper is not PID 1")
	assert.NotEqual(t, "1", res.ProcSelf, "/proc should show the outer namespace")
	assert.Empty(t, res.Errors)
	assert.Len(t, res.Orphans, pid1Commands)
	assert.Empty(t, res.Zombies, "orphans not reaped")
	// The reaper never took a status that os/exec was owed.
	require.Len(t, res.Codes, pid1Commands)
	for i, code := range res.Codes {
		assert.Equal(t, 3, code, "command %d", i)
	}
}

// pid1Commands is how many commands the helper runs, each leaving an
// orphan; pid1Workers run them concurrently.
const (
	pid1Commands = 40
	pid1Workers  = 4
)

// TestReaperPID1Helper runs only in the child of TestReaperAsPID1. It
// runs commands that leave orphans, which become its zombies as PID 1,
// and reports on stdout which were reaped and which exit codes os/exec
// delivered.
func TestReaperPID1Helper(t *testing.T) {
	if os.Getenv(pid1Helper) == "" {
		t.Skip("run by TestReaperAsPID1 as PID 1 of a PID namespace")
	}
	res := pid1Result{Pid: os.Getpid()}
	res.ProcSelf, _ = os.Readlink("/proc/self")
	defer func() {
		b, _ := json.Marshal(res)
		fmt.Println(pid1ResultPrefix + string(b))
	}()

	reaper := NewReaper()
	reaper.MinInterval = time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); reaper.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	r := Runner{Reaper: reaper}
	var mu sync.Mutex // guards res while the workers run
	var workers sync.WaitGroup
	for w := range pid1Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for range pid1Commands / pid1Workers {
				// The subshell outlives the shell, so it is orphaned to
				// PID 1 and exits there; its output goes elsewhere, so
				// the command ends as soon as its shell does.
				out, err := r.Run(ctx, Command{Cmd: "(sleep 0.1; exit 0) >/dev/null 2>&1 & echo $!; exit 3"})
				mu.Lock()
				if err != nil {
					res.Errors = append(res.Errors, fmt.Sprintf("worker %d: %v", w, err))
				} else if pid, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout))); err != nil {
					res.Errors = append(res.Errors, fmt.Sprintf("worker %d: output %q", w, out.Stdout))
				} else {
					res.Codes = append(res.Codes, out.Code)
					res.Orphans = append(res.Orphans, pid)
				}
				mu.Unlock()
			}
		}()
	}
	workers.Wait()

	// Every orphan exits within 0.1 s; give the reaper ample time.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range res.Orphans {
		for {
			if _, gone := zombie(pid); gone {
				break
			}
			if time.Now().After(deadline) {
				res.Zombies = append(res.Zombies, pid)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
