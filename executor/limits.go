package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/cgroups"
)

// ErrLimitsUnsupported is returned by Start, Run and StartTTY for a
// command with a memory or pids limit where the Runner has no cgroup
// leaves to give it (Runner.Cgroups is nil), and for rlimits where it has
// neither ptrace nor a helper (Runner.Ptrace false, Runner.Helper empty).
// Its text is cgroups.ErrUnavailable's.
var ErrLimitsUnsupported = cgroups.ErrUnavailable

// Limits bound what one command may use. A zero field sets no limit.
type Limits struct {
	CPUSeconds    int64 `json:"cpu_seconds,omitempty"`     // RLIMIT_CPU: SIGXCPU, then SIGKILL a second later
	FileSizeBytes int64 `json:"file_size_bytes,omitempty"` // RLIMIT_FSIZE: SIGXFSZ on a write past it
	OpenFiles     int64 `json:"open_files,omitempty"`      // RLIMIT_NOFILE
	MemoryBytes   int64 `json:"memory_bytes,omitempty"`    // a cgroup leaf's memory.max, no swap
	Pids          int64 `json:"pids,omitempty"`            // a cgroup leaf's pids.max
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// Or returns l with each limit it leaves unset taken from def: a
// request's own limits win, key by key, over its session's.
func (l Limits) Or(def Limits) Limits {
	pick := func(a, b int64) int64 {
		if a != 0 {
			return a
		}
		return b
	}
	return Limits{CPUSeconds: pick(l.CPUSeconds, def.CPUSeconds), FileSizeBytes: pick(l.FileSizeBytes, def.FileSizeBytes),
		OpenFiles: pick(l.OpenFiles, def.OpenFiles), MemoryBytes: pick(l.MemoryBytes, def.MemoryBytes), Pids: pick(l.Pids, def.Pids)}
}

func (l Limits) rlimited() bool { return l.CPUSeconds > 0 || l.FileSizeBytes > 0 || l.OpenFiles > 0 }
func (l Limits) cgrouped() bool { return l.MemoryBytes > 0 || l.Pids > 0 }

// LimitSupport says which limits a Runner can apply; the agent reports it
// in GET /info.
type LimitSupport struct {
	CPUSeconds    bool   `json:"cpu_seconds"`
	FileSizeBytes bool   `json:"file_size_bytes"`
	OpenFiles     bool   `json:"open_files"`
	MemoryBytes   bool   `json:"memory_bytes"`
	Pids          bool   `json:"pids"`
	Mechanism     string `json:"mechanism"` // "rlimit", "cgroup2+rlimit", or "" for none
}

// LimitSupport says which limits r can apply.
func (r *Runner) LimitSupport() LimitSupport {
	rl, cg := r.Helper != "" || r.Ptrace, r.Cgroups != nil
	s := LimitSupport{CPUSeconds: rl, FileSizeBytes: rl, OpenFiles: rl, MemoryBytes: cg, Pids: cg}
	switch {
	case rl && cg:
		s.Mechanism = "cgroup2+rlimit"
	case rl:
		s.Mechanism = "rlimit"
	case cg:
		s.Mechanism = "cgroup2"
	}
	return s
}

// CheckLimits returns ErrLimitsUnsupported if r cannot apply l.
func (r *Runner) CheckLimits(l Limits) error {
	if (l.cgrouped() && r.Cgroups == nil) || (l.rlimited() && r.Helper == "" && !r.Ptrace) {
		return ErrLimitsUnsupported
	}
	return nil
}

// HelperArg is the hidden first argument with which the agent's binary
// runs as the rlimit helper: main hands such a run to RunHelper before
// anything else. It is never listed in help.
const HelperArg = "__rlimit-helper"

// applyLimits makes p.cmd apply l, and records l in p. The rlimits are
// set by ptrace (see byPtrace), which startCmd does, or else through the
// helper (see limitCmd). The leaf limitCmd makes is removed by p.wait once
// the command has ended.
func (r *Runner) applyLimits(p *Process, l Limits) error {
	leaf, rls, err := r.limitCmd(p.cmd, l, true)
	if err != nil {
		return err
	}
	p.limits, p.rlimits, p.leaf = l, rls, leaf
	return nil
}

// limitCmd makes cmd apply l. The rlimits are returned for startCmd to
// set by ptrace when ptrace is allowed and byPtrace says it can; else the
// helper runs in place of the command (the command's own path and argv
// follow its "--"). The memory and pids limits go through a new cgroup
// leaf, which cmd is started in. cmd.SysProcAttr must be set.
func (r *Runner) limitCmd(cmd *exec.Cmd, l Limits, ptrace bool) (*cgroups.Leaf, []rlimit, error) {
	if err := r.CheckLimits(l); err != nil {
		return nil, nil, err
	}
	var traced []rlimit
	if rls := l.rlimits(); len(rls) > 0 {
		switch {
		case ptrace && r.byPtrace(cmd, rls):
			traced = rls
		case r.Helper != "":
			args := []string{r.Helper, HelperArg}
			for _, rl := range rls {
				args = append(args, rl.name+"="+strconv.FormatUint(rl.lim.Cur, 10))
			}
			args = append(args, "--", cmd.Path)
			cmd.Args = append(args, cmd.Args...)
			cmd.Path = r.Helper
		default:
			return nil, nil, ErrLimitsUnsupported
		}
	}
	if !l.cgrouped() {
		return nil, traced, nil
	}
	leaf, err := r.Cgroups.NewLeaf(cgroups.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids})
	if err != nil {
		return nil, nil, err
	}
	fd, err := syscall.Open(leaf.Path(), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = leaf.Remove()
		return nil, nil, err
	}
	// clone3's CLONE_INTO_CGROUP: the command is in its leaf from its
	// first instruction, and the agent never is.
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	return leaf, traced, nil
}

// closeCgroupFD closes the leaf's descriptor once the command has started
// (or failed to).
func closeCgroupFD(cmd *exec.Cmd) {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.UseCgroupFD {
		_ = syscall.Close(cmd.SysProcAttr.CgroupFD)
		cmd.SysProcAttr.UseCgroupFD = false
	}
}

// endLeaf reads which limit fired in the command's leaf, if it has one,
// and removes the leaf; the counters must be read first.
func endLeaf(leaf *cgroups.Leaf) cgroups.Events {
	if leaf == nil {
		return cgroups.Events{}
	}
	ev := leaf.Events()
	_ = leaf.Remove() // a leaf that stays is a few bytes of the kernel's; the command is gone either way
	return ev
}

// The reasons of a Termination that a limit caused.
const (
	ReasonCPULimit      = "cpu_limit"       // RLIMIT_CPU: SIGXCPU, or the SIGKILL after it
	ReasonFileSizeLimit = "file_size_limit" // RLIMIT_FSIZE: SIGXFSZ
	ReasonMemoryLimit   = "memory_limit"    // the leaf's memory.events oom_kill grew
	ReasonPidsLimit     = "pids_limit"      // the leaf's pids.events max grew while the command failed
)

// limitFired returns the reason of the limit in l that ended a command
// whose result is res, or "" if none did. A signal counts when it ended
// the shell, and when the shell exited with 128 plus it (the child it
// waited for died of it). usage is the shell's CPU time, which tells
// RLIMIT_CPU's SIGKILL from anyone else's.
func limitFired(res Result, l Limits, ev cgroups.Events, usage time.Duration) string {
	if res.TimedOut || res.Code == 0 {
		return ""
	}
	sig := res.Signal
	if sig == 0 && res.Code > 128 && res.Code < 128+65 {
		sig = syscall.Signal(res.Code - 128)
	}
	switch {
	case l.MemoryBytes > 0 && ev.OOMKills > 0:
		return ReasonMemoryLimit
	case l.Pids > 0 && ev.PidsMax > 0:
		return ReasonPidsLimit
	case l.CPUSeconds > 0 && (sig == syscall.SIGXCPU ||
		(res.Signal == syscall.SIGKILL && usage >= time.Duration(l.CPUSeconds)*time.Second)):
		return ReasonCPULimit
	case l.FileSizeBytes > 0 && sig == syscall.SIGXFSZ:
		return ReasonFileSizeLimit
	}
	return ""
}

// cpuTime is the CPU time the command's shell used.
func cpuTime(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// LimitTermination returns the Termination of a command that one of its
// limits ended, and false if none did; a Termination computed for any
// command asks it first.
func LimitTermination(res Result) (Termination, bool) {
	if res.Limit == "" {
		return Termination{}, false
	}
	t := Termination{Reason: res.Limit}
	sig := res.Signal
	if sig == 0 && res.Code > 128 && res.Code < 128+65 {
		sig = syscall.Signal(res.Code - 128)
	}
	if sig != 0 && res.Limit != ReasonPidsLimit {
		t.Signal = unix.SignalName(sig)
	}
	return t, true
}

// RunHelper is the rlimit helper: args are HelperArg's, name=value
// settings ("cpu", "fsize", "nofile"), then "--", the command's path and
// its argv. It sets each limit, soft and hard (see rlimitKinds), and
// replaces itself with the command, keeping its environment. It never
// returns: if a limit cannot be set or the command cannot be run, it says
// so on stderr and exits 126, as a shell does for a command it cannot
// execute.
func RunHelper(args []string) {
	err := helper(args)
	fmt.Fprintln(os.Stderr, "sandbox-executor:", err)
	os.Exit(126)
}

func helper(args []string) error {
	for i, a := range args {
		if a == "--" {
			if len(args) < i+3 {
				return errors.New("rlimit helper: no command")
			}
			return syscall.Exec(args[i+1], args[i+2:], os.Environ())
		}
		name, v, _ := strings.Cut(a, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("rlimit helper: bad setting %q", a)
		}
		rl, ok := rlimitOf(name, n)
		if !ok {
			return fmt.Errorf("rlimit helper: unknown limit %q", name)
		}
		if err := unix.Setrlimit(rl.res, &rl.lim); err != nil {
			return fmt.Errorf("setting %s to %d: %w", name, n, err)
		}
	}
	return errors.New("rlimit helper: no command")
}
