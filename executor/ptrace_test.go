package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// helperRunner sets rlimits only through the helper, as the agent does
// where ProbePtrace fails.
func helperRunner() *Runner { return &Runner{Helper: "/proc/self/exe"} }

func discardLines(Stream, time.Time, [][]byte) {}

// procLimits returns the limits of a /proc/<pid>/limits text as "soft
// hard" by name, e.g. "Max open files": "20 20".
func procLimits(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n")[1:] {
		if len(line) < 26 {
			continue
		}
		f := strings.Fields(line[25:])
		require.GreaterOrEqual(t, len(f), 2, line)
		out[strings.TrimSpace(line[:25])] = f[0] + " " + f[1]
	}
	return out
}

// procStatus returns the value of key in /proc/<pid>/status.
func procStatus(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return ""
}

// tracedOrStopped returns this process's children that are stopped
// (state T or t) or traced by anyone.
func tracedOrStopped(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[1] != me {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if f[0] == "t" || f[0] == "T" || (err == nil && !strings.Contains(string(st), "TracerPid:\t0\n")) {
			out = append(out, e.Name()+" "+f[0])
		}
	}
	return out
}

// The limits are in force in the command's first instruction: cat, the
// program exec'd (no shell before it), reads its own.
func TestPtraceLimitsInFirstInstruction(t *testing.T) {
	want := map[string]string{"Max cpu time": "7 8", "Max file size": "4096 4096", "Max open files": "20 20"}
	l := Limits{CPUSeconds: 7, FileSizeBytes: 4096, OpenFiles: 20}
	// As another user, with CAP_SYS_RESOURCE or without it (then from a
	// thread that takes the user's ids; see tracerThread).
	for _, u := range []string{"", "nobody", "nobody without CAP_SYS_RESOURCE"} {
		c := Command{Argv: []string{"/bin/cat", "/proc/self/limits"}, Limits: l}
		r := limitedRunner()
		if u != "" {
			if os.Geteuid() != 0 {
				continue
			}
			usr, err := r.LookupUser("nobody")
			require.NoError(t, err)
			c.User = usr
		}
		if strings.HasSuffix(u, "without CAP_SYS_RESOURCE") {
			r.caps.once.Do(func() {})
		}
		p, err := r.Start(t.Context(), c, discardLines)
		require.NoError(t, err)
		assert.NotNil(t, p.rlimits, "set by ptrace")
		assert.Equal(t, "/bin/cat", p.cmd.Path, "no helper before the command")
		require.Equal(t, 0, p.Wait().Code)

		o, err := r.Run(t.Context(), c)
		require.NoError(t, err)
		got := procLimits(t, string(o.Stdout))
		for k, v := range want {
			assert.Equal(t, v, got[k], "%s as %q", k, u)
		}
	}
	// The shell's own, as `ulimit` shows them.
	o, err := limitedRunner().Run(t.Context(), Command{Cmd: "ulimit -n; ulimit -t; ulimit -f", Limits: l})
	require.NoError(t, err)
	assert.Equal(t, "20\n7\n8\n", string(o.Stdout)) // ulimit -f counts 512-byte blocks
	assert.Empty(t, tracedOrStopped(t))
}

// Once started, a command is not traced, and not stopped: on pipes and on
// a terminal (a session leader with a controlling terminal).
func TestPtraceDetaches(t *testing.T) {
	r := limitedRunner()
	check := func(p *Process) {
		t.Helper()
		assert.Equal(t, "0", procStatus(t, p.Pid(), "TracerPid"))
		assert.Regexp(t, `^[RS] `, procStatus(t, p.Pid(), "State"))
		require.NoError(t, p.Kill())
		res := p.Wait()
		assert.Equal(t, syscall.SIGKILL, res.Signal)
	}
	p, err := r.Start(t.Context(), Command{Cmd: "exec sleep 30", Limits: Limits{OpenFiles: 30}}, discardLines)
	require.NoError(t, err)
	check(p)

	p, master, err := r.StartTTY(TTYCommand{Args: []string{"/bin/sh", "-c", "exec sleep 30"}, Limits: Limits{CPUSeconds: 30}})
	require.NoError(t, err)
	assert.NotNil(t, p.rlimits)
	sid := procStatus(t, p.Pid(), "NSsid")
	assert.Equal(t, strconv.Itoa(p.Pid()), sid, "it leads its session")
	check(p)
	master.Close()

	// As another user, from a tracer thread of its own (see tracerThread).
	if os.Geteuid() == 0 {
		r := limitedRunner()
		r.caps.once.Do(func() {})
		u, err := r.LookupUser("nobody")
		require.NoError(t, err)
		p, master, err := r.StartTTY(TTYCommand{Args: []string{"/bin/sh", "-c", "exec sleep 30"}, User: u,
			Limits: Limits{CPUSeconds: 30}})
		require.NoError(t, err)
		assert.NotNil(t, p.rlimits)
		assert.Equal(t, "65534", strings.Fields(procStatus(t, p.Pid(), "Uid"))[0])
		lim, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/limits")
		require.NoError(t, err)
		assert.Equal(t, "30 31", procLimits(t, string(lim))["Max cpu time"])
		check(p)
		master.Close()
	}
	assert.Empty(t, tracedOrStopped(t))
}

// A context that ends at any moment around the start (before the stop,
// in it, after the detach) leaves no stopped or traced child, and Wait
// still reports how the command ended. With a Reaper too, as the agent
// runs as PID 1.
func TestPtraceCancelAroundStart(t *testing.T) {
	for _, tc := range []struct {
		name           string
		reaper, nobody bool
	}{{"root", false, false}, {"reaper", true, false}, {"nobody", false, true}} {
		// A subtest each, so that the Reaper stops with its own: it would
		// reap the children of another Runner.
		t.Run(tc.name, func(t *testing.T) {
			r := limitedRunner()
			var u *User
			if tc.nobody {
				if os.Geteuid() != 0 {
					t.Skip("needs root to switch users")
				}
				var err error
				u, err = r.LookupUser("nobody")
				require.NoError(t, err)
				r.caps.once.Do(func() {}) // from a tracer thread of its own
			}
			if tc.reaper {
				ctx, cancel := context.WithCancel(t.Context())
				r.Reaper = NewReaper()
				done := make(chan struct{})
				go func() { r.Reaper.Run(ctx); close(done) }()
				t.Cleanup(func() { cancel(); <-done })
			}
			for i := range 30 {
				ctx, cancel := context.WithCancel(t.Context())
				timer := time.AfterFunc(time.Duration(i*20)*time.Microsecond, cancel)
				out, err := r.Run(ctx, Command{Cmd: "exec sleep 5", User: u, Limits: Limits{CPUSeconds: 5}})
				timer.Stop()
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled, "cancelled before it started") // exec refuses to start then
					continue
				}
				assert.Equal(t, syscall.SIGKILL, out.Signal, "run %d", i)
			}
			assert.Empty(t, tracedOrStopped(t))
			running, _ := r.Running()
			assert.Equal(t, 0, running)
		})
	}
}

// startTracedSleep starts sleep traced by this goroutine's locked thread,
// as startTraced does, and waits until it is in its stop after execve. It
// returns the mask the child is to get back.
func startTracedSleep(t *testing.T) (*exec.Cmd, *unix.Sigset_t) {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Ptrace: true}
	mask, err := forkBlocked(cmd.Start)
	require.NoError(t, err)
	require.NotNil(t, mask)
	code, status, err := peekChild(cmd.Process.Pid)
	require.NoError(t, err)
	require.Equal(t, cldTrapped, code)
	require.Equal(t, int(syscall.SIGTRAP), status)
	return cmd, mask
}

// From its fork to its release the child blocks every signal that could
// stop it before its execve, which would hang the start; released, it has
// the thread's own mask, as a command started without limits does.
func TestPtraceSignalMask(t *testing.T) {
	t.Run("while stopped", func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd, mask := startTracedSleep(t)
		blocked, err := strconv.ParseUint(procStatus(t, cmd.Process.Pid, "SigBlk"), 16, 64)
		require.NoError(t, err)
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCHLD, syscall.SIGWINCH, syscall.SIGUSR1} {
			assert.NotZero(t, blocked&(1<<(sig-1)), "%v blocked", sig)
		}
		assert.Zero(t, blocked&(1<<(syscall.SIGTRAP-1)), "SIGTRAP, the stop's, is not")
		_, err = releaseTraced(cmd.Process.Pid, nil, mask)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("%016x", mask.Val[0]), procStatus(t, cmd.Process.Pid, "SigBlk"))
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
	})
	t.Run("commands", func(t *testing.T) {
		sigBlk := func(r *Runner, c Command) string {
			t.Helper()
			c.Argv = []string{"/bin/grep", "SigBlk", "/proc/self/status"}
			out, err := r.Run(t.Context(), c)
			require.NoError(t, err)
			require.Equal(t, 0, out.Code, "%s", out.Stderr)
			return string(out.Stdout)
		}
		want := sigBlk(&Runner{}, Command{})
		assert.Equal(t, want, sigBlk(limitedRunner(), Command{Limits: Limits{OpenFiles: 20}}))
		if os.Geteuid() == 0 {
			r := limitedRunner()
			r.caps.once.Do(func() {}) // from a tracer thread of its own
			u, err := r.LookupUser("nobody")
			require.NoError(t, err)
			assert.Equal(t, want, sigBlk(r, Command{User: u, Limits: Limits{OpenFiles: 20}}))
		}
	})
}

// A signal sent to the command while it is stopped is delivered once it
// runs: the detach suppresses only execve's SIGTRAP.
func TestPtraceSignalWhileStopped(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd, mask := startTracedSleep(t)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	stopped, err := releaseTraced(cmd.Process.Pid, Limits{OpenFiles: 10}.rlimits(), mask)
	require.NoError(t, err)
	assert.True(t, stopped)
	_ = cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	assert.Equal(t, syscall.SIGTERM, ws.Signal())
}

// A command killed in its stop (a cancelled context's SIGKILL) is left
// for its Wait, which reports the kill rather than ECHILD.
func TestPtraceKilledWhileStopped(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd, mask := startTracedSleep(t)
	require.NoError(t, cmd.Process.Kill())
	stopped, err := releaseTraced(cmd.Process.Pid, Limits{OpenFiles: 10}.rlimits(), mask)
	require.NoError(t, err)
	_ = stopped // killed before or after the peek: both are fine
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "Wait reaped it")
	assert.Equal(t, syscall.SIGKILL, cmd.ProcessState.Sys().(syscall.WaitStatus).Signal())
}

// A program that cannot be exec'd leaves nothing traced behind: the shell
// reports it as it would without limits.
func TestPtraceExecFailure(t *testing.T) {
	r := limitedRunner()
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(script, []byte("#!/no/such/interpreter\n"), 0o755))
	out, err := r.Run(t.Context(), Command{Argv: []string{script}, Limits: Limits{OpenFiles: 20}})
	require.NoError(t, err)
	assert.Equal(t, 127, out.Code, "%s", out.Stderr)

	_, _, err = r.StartTTY(TTYCommand{Args: []string{filepath.Join(dir, "missing")}, Limits: Limits{OpenFiles: 20}})
	assert.ErrorIs(t, err, syscall.ENOENT)
	assert.Empty(t, tracedOrStopped(t))
	running, _ := r.Running()
	assert.Equal(t, 0, running)
}

func TestByPtrace(t *testing.T) {
	var own unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &own))
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	setuid := filepath.Join(t.TempDir(), "setuid")
	require.NoError(t, os.WriteFile(setuid, nil, 0o755))
	require.NoError(t, os.Chmod(setuid, os.ModeSetuid|0o755))
	for _, tc := range []struct {
		name        string
		ptrace      bool
		sysResource bool
		path        string
		cred        *syscall.Credential
		l           Limits
		want        bool
	}{
		{"no ptrace", false, true, "/bin/sh", nil, Limits{OpenFiles: 10}, false},
		{"root", true, true, "/bin/sh", nil, Limits{OpenFiles: 10}, true},
		{"another user", true, true, "/bin/sh", nobody, Limits{OpenFiles: 10}, true},
		{"another user without CAP_SYS_RESOURCE", true, false, "/bin/sh", nobody, Limits{OpenFiles: 10}, true},
		{"same user without CAP_SYS_RESOURCE", true, false, "/bin/sh", nil, Limits{OpenFiles: 10}, true},
		{"above the hard limit without CAP_SYS_RESOURCE", true, false, "/bin/sh", nil, Limits{OpenFiles: int64(own.Max) + 1}, own.Max == unix.RLIM_INFINITY},
		{"above the hard limit", true, true, "/bin/sh", nil, Limits{OpenFiles: int64(own.Max) + 1}, true},
		{"a set-user-ID program as another user", true, true, setuid, nobody, Limits{OpenFiles: 10}, false},
		{"a set-user-ID program as the agent", true, true, setuid, nil, Limits{OpenFiles: 10}, false},
		{"a missing program (execve says so)", true, true, "/no/such/program", nobody, Limits{OpenFiles: 10}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Runner{Ptrace: tc.ptrace}
			r.caps.once.Do(func() { r.caps.resource = tc.sysResource })
			cmd := &exec.Cmd{Path: tc.path, SysProcAttr: &syscall.SysProcAttr{Credential: tc.cred}}
			assert.Equal(t, tc.want, r.byPtrace(cmd, tc.l.rlimits()))
		})
	}
}

// Where prlimit cannot serve a command (a limit above the agent's hard
// one, without CAP_SYS_RESOURCE), the helper gets it, and says it could
// not set it either, as before.
func TestPtraceFallsBackToHelper(t *testing.T) {
	var own unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &own))
	if own.Max == unix.RLIM_INFINITY {
		t.Skip("no hard limit on open files to go above")
	}
	r := limitedRunner()
	r.caps.once.Do(func() {}) // as if the agent had no CAP_SYS_RESOURCE
	p, err := r.Start(t.Context(), Command{Cmd: "echo ran", Limits: Limits{OpenFiles: int64(own.Max) + 1}}, discardLines)
	require.NoError(t, err)
	assert.Nil(t, p.rlimits)
	assert.Equal(t, "/proc/self/exe", p.cmd.Path)
	assert.Equal(t, 126, p.Wait().Code)
}

// The helper, the fallback where ptrace is refused, still applies every
// rlimit, as root and as another user, and they fire as before.
func TestHelperLimits(t *testing.T) {
	r := helperRunner()
	out, err := r.Run(t.Context(), Command{Cmd: "ulimit -t; ulimit -n", Limits: Limits{CPUSeconds: 7, OpenFiles: 20, FileSizeBytes: 4096}})
	require.NoError(t, err)
	assert.Equal(t, "7\n20\n", string(out.Stdout))

	dir := t.TempDir()
	out, err = r.Run(t.Context(), Command{Cmd: "head -c 10M /dev/zero > f", Dir: dir, Limits: Limits{FileSizeBytes: 1 << 20}})
	require.NoError(t, err)
	assert.Equal(t, ReasonFileSizeLimit, out.Limit)

	out, err = r.Run(t.Context(), Command{Cmd: "while :; do :; done", Limits: Limits{CPUSeconds: 1}})
	require.NoError(t, err)
	assert.Equal(t, ReasonCPULimit, out.Limit)

	if os.Geteuid() == 0 {
		u, err := r.LookupUser("nobody")
		require.NoError(t, err)
		out, err = r.Run(t.Context(), Command{Cmd: "id -u; " + openHundred, User: u, Limits: Limits{OpenFiles: 16}})
		require.NoError(t, err)
		assert.Contains(t, string(out.Stdout), "65534\nstopped at")
	}
}

func TestProbePtrace(t *testing.T) {
	assert.NoError(t, ProbePtrace("/proc/self/exe"), "ptrace works on this machine")
	assert.Error(t, ProbePtrace(filepath.Join(t.TempDir(), "missing")))
	assert.Empty(t, tracedOrStopped(t))
}
