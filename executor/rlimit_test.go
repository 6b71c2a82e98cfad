package executor

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/cgroups"
)

// limitedRunner sets rlimits as the agent does where ptrace works: by
// ptrace, with the helper for what prlimit cannot serve. The helper is the
// test binary (see TestMain), run through /proc/self/exe as the agent
// does, so that any user can run it. helperRunner forces the helper.
func limitedRunner() *Runner { return &Runner{Helper: "/proc/self/exe", Ptrace: true} }

// childCPU is the CPU time of this process's waited-for children so far.
func childCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPULimit(t *testing.T) {
	for _, tc := range []struct{ name, cmd string }{
		{"shell", "while :; do :; done"},
		{"child", "yes > /dev/null; exit $?"}, // the shell reports 128+SIGXCPU
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := childCPU(t)
			out, err := limitedRunner().Run(t.Context(), Command{Cmd: tc.cmd, Limits: Limits{CPUSeconds: 1}})
			require.NoError(t, err)
			// Within 3 s of CPU: of wall time too on an idle machine, but
			// a loaded one gives the loop a fraction of a core.
			used := childCPU(t) - before
			assert.GreaterOrEqual(t, used, 500*time.Millisecond) // rusage scales tick samples: under load it may read below the limit
			assert.Less(t, used, 3*time.Second)
			assert.Equal(t, ReasonCPULimit, out.Limit)
			term, ok := LimitTermination(out.Result)
			assert.True(t, ok)
			assert.Equal(t, Termination{Reason: ReasonCPULimit, Signal: "SIGXCPU"}, term)
		})
	}
}

func TestFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	out, err := limitedRunner().Run(t.Context(), Command{Cmd: "head -c 10M /dev/zero > f", Dir: dir,
		Limits: Limits{FileSizeBytes: 1 << 20}})
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGXFSZ), out.Code)
	assert.Equal(t, ReasonFileSizeLimit, out.Limit)
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())
}

// openHundred opens 100 files at once, and says how far it got.
// (dash redirects only descriptors 0 to 9; bash picks free ones.)
const openHundred = `bash -c 'for i in $(seq 100); do exec {fd}</dev/null || { echo "stopped at $i"; exit 1; }; done; echo all'`

func TestOpenFilesLimit(t *testing.T) {
	out, err := limitedRunner().Run(t.Context(), Command{Cmd: "ulimit -n; " + openHundred, Limits: Limits{OpenFiles: 16}})
	require.NoError(t, err)
	assert.NotEqual(t, 0, out.Code)
	assert.Contains(t, string(out.Stdout), "16\n")
	assert.NotContains(t, string(out.Stdout), "all")
	assert.Empty(t, out.Limit, "a refused open is the command's own failure")

	out, err = limitedRunner().Run(t.Context(), Command{Cmd: openHundred})
	require.NoError(t, err)
	assert.Equal(t, "all\n", string(out.Stdout), "without the limit the same command succeeds")
}

func TestLimitsAsOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	r := limitedRunner()
	u, err := r.LookupUser("nobody")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755)) // the test's own, 0700
	require.NoError(t, os.Chmod(dir, 0o777))

	out, err := r.Run(t.Context(), Command{Cmd: "id -u; head -c 10M /dev/zero > f", Dir: dir, User: u,
		Limits: Limits{FileSizeBytes: 1 << 20, OpenFiles: 16, CPUSeconds: 5}})
	require.NoError(t, err)
	assert.Equal(t, "65534\n", string(out.Stdout))
	assert.Equal(t, ReasonFileSizeLimit, out.Limit)
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())

	out, err = r.Run(t.Context(), Command{Cmd: "while :; do :; done", User: u, Limits: Limits{CPUSeconds: 1}})
	require.NoError(t, err)
	assert.Equal(t, ReasonCPULimit, out.Limit)

	out, err = r.Run(t.Context(), Command{Cmd: openHundred, User: u, Limits: Limits{OpenFiles: 16}})
	require.NoError(t, err)
	assert.Contains(t, string(out.Stdout), "stopped at")
}

func TestLimitsLeaveTheAgentAlone(t *testing.T) {
	before, err := os.ReadFile("/proc/self/limits")
	require.NoError(t, err)
	out, err := limitedRunner().Run(t.Context(), Command{Cmd: "ulimit -t; ulimit -n",
		Limits: Limits{CPUSeconds: 7, OpenFiles: 20, FileSizeBytes: 4096}})
	require.NoError(t, err)
	assert.Equal(t, "7\n20\n", string(out.Stdout))
	after, err := os.ReadFile("/proc/self/limits")
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

func TestLimitsUnsupported(t *testing.T) {
	r := &Runner{} // no helper, no cgroups
	for _, l := range []Limits{{MemoryBytes: 64 << 20}, {Pids: 10}, {CPUSeconds: 1}} {
		_, err := r.Run(t.Context(), Command{Cmd: "true", Limits: l})
		assert.ErrorIs(t, err, ErrLimitsUnsupported)
		_, _, err = r.StartTTY(TTYCommand{Args: []string{"/bin/sh"}, Limits: l})
		assert.ErrorIs(t, err, ErrLimitsUnsupported)
	}
	running, _ := r.Running()
	assert.Equal(t, 0, running, "a refused command takes no slot")
	assert.Equal(t, LimitSupport{}, r.LimitSupport())
	assert.Equal(t, LimitSupport{CPUSeconds: true, FileSizeBytes: true, OpenFiles: true, Mechanism: "rlimit"},
		limitedRunner().LimitSupport())
}

func TestLimitFired(t *testing.T) {
	all := Limits{CPUSeconds: 2, FileSizeBytes: 1, OpenFiles: 1, MemoryBytes: 1, Pids: 1}
	for _, tc := range []struct {
		name  string
		res   Result
		l     Limits
		ev    cgroups.Events
		usage time.Duration
		want  string
	}{
		{"exit 0", Result{}, all, cgroups.Events{OOMKills: 1}, 0, ""},
		{"oom", Result{Code: 137, Signal: syscall.SIGKILL}, all, cgroups.Events{OOMKills: 1}, 0, ReasonMemoryLimit},
		{"oom without the limit", Result{Code: 137, Signal: syscall.SIGKILL}, Limits{}, cgroups.Events{OOMKills: 1}, 0, ""},
		{"pids", Result{Code: 1}, all, cgroups.Events{PidsMax: 3}, 0, ReasonPidsLimit},
		{"sigxcpu", Result{Code: 152, Signal: syscall.SIGXCPU}, all, cgroups.Events{}, 0, ReasonCPULimit},
		{"shell reports sigxcpu", Result{Code: 152}, all, cgroups.Events{}, 0, ReasonCPULimit},
		{"sigkill after the cpu limit", Result{Code: 137, Signal: syscall.SIGKILL}, all, cgroups.Events{}, 3 * time.Second, ReasonCPULimit},
		{"someone else's sigkill", Result{Code: 137, Signal: syscall.SIGKILL}, all, cgroups.Events{}, time.Second, ""},
		{"sigxfsz", Result{Code: 153}, all, cgroups.Events{}, 0, ReasonFileSizeLimit},
		{"sigxfsz without the limit", Result{Code: 153}, Limits{}, cgroups.Events{}, 0, ""},
		{"timeout", Result{Code: ExitTimedOut, TimedOut: true}, all, cgroups.Events{OOMKills: 1}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, limitFired(tc.res, tc.l, tc.ev, tc.usage))
		})
	}
}

func TestLimitsOr(t *testing.T) {
	def := Limits{CPUSeconds: 5, MemoryBytes: 100}
	assert.Equal(t, Limits{CPUSeconds: 1, MemoryBytes: 100, Pids: 3}, Limits{CPUSeconds: 1, Pids: 3}.Or(def))
}

// TestCgroupLimits runs only where the test may make cgroup v2 leaves (a
// microVM, a container with a delegated cgroup namespace); elsewhere the
// server's tests assert the 501, and the cgroups package's the leaves on a
// fake tree. Probe may move this test process into a leaf of its own, as it
// does the agent.
func TestCgroupLimits(t *testing.T) {
	m, err := cgroups.Probe()
	if err != nil {
		t.Skipf("no writable cgroup v2 hierarchy here: %v", err)
	}
	r := &Runner{Helper: "/proc/self/exe", Cgroups: m}
	out, err := r.Run(t.Context(), Command{Cmd: "/usr/bin/python3 -c 'bytearray(512 << 20)'", Limits: Limits{MemoryBytes: 64 << 20}})
	require.NoError(t, err)
	assert.Equal(t, ReasonMemoryLimit, out.Limit, "code %d, stderr %s", out.Code, out.Stderr)

	out, err = r.Run(t.Context(), Command{Cmd: "for i in $(seq 40); do sleep 5 & done; wait", Limits: Limits{Pids: 10}})
	require.NoError(t, err)
	assert.Equal(t, ReasonPidsLimit, out.Limit, "code %d, stderr %s", out.Code, out.Stderr)

	// The agent (here, this test) lives, and may run the next command.
	out, err = r.Run(t.Context(), Command{Cmd: "echo alive", Limits: Limits{MemoryBytes: 64 << 20, Pids: 10}})
	require.NoError(t, err)
	assert.Equal(t, "alive\n", string(out.Stdout))
}
