package executor

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setting a command's rlimits by ptrace, without the helper's second exec.
//
// A child started with SysProcAttr.Ptrace calls PTRACE_TRACEME right
// before its execve (after setuid, setsid, TIOCSCTTY and the rest), so a
// successful execve leaves it stopped by SIGTRAP before the new program's
// first instruction, traced by the thread that started it. That thread
// then sets the rlimits with prlimit and detaches, suppressing the
// SIGTRAP: the program starts with its limits in force and is never
// traced again. Everything runs on one locked thread, as ptrace requires
// (only the tracer thread may detach).
//
// The stop is looked at with WNOWAIT and never consumed: an exit (the
// child was killed while stopped, as a cancelled context's SIGKILL does)
// is left for os/exec's Wait, which would otherwise fail with ECHILD, and
// a stop that is never waited for vanishes with the detach.
//
// Between its PTRACE_TRACEME and its execve, the child must not stop: the
// thread that started it waits in vfork for that execve, so a stop there
// (a signal sent to it, as `kill -TERM -1` by root does) would hang the
// start, and with it every other fork of the agent. So the thread blocks
// the signals that could stop it over the fork (see forkBlocked), the
// child inherits that mask, and the release gives the child the thread's
// own mask back (PTRACE_SETSIGMASK) before it runs: a signal sent to it
// meanwhile is delivered then.

// The si_code of a stopped child in waitid's siginfo (x/sys/unix has not
// these).
const (
	cldTrapped = 4 // CLD_TRAPPED: a traced child stopped
	cldStopped = 5 // CLD_STOPPED
)

// rlimit is one resource limit to set on a command.
type rlimit struct {
	name string // as the helper takes it: "cpu", "fsize", "nofile"
	res  int
	lim  unix.Rlimit
}

// rlimitKinds are the rlimits a Limits sets, in order, by the names the
// helper takes. The hard limit is the soft one plus slack: the CPU
// limit's is a second above, so that SIGXCPU comes before SIGKILL.
var rlimitKinds = [...]struct {
	name  string
	res   int
	of    func(Limits) int64
	slack uint64
}{
	{"cpu", unix.RLIMIT_CPU, func(l Limits) int64 { return l.CPUSeconds }, 1},
	{"fsize", unix.RLIMIT_FSIZE, func(l Limits) int64 { return l.FileSizeBytes }, 0},
	{"nofile", unix.RLIMIT_NOFILE, func(l Limits) int64 { return l.OpenFiles }, 0},
}

// rlimitOf returns the rlimit the helper's setting name=n stands for, and
// false for a name it does not know.
func rlimitOf(name string, n uint64) (rlimit, bool) {
	for _, k := range rlimitKinds {
		if k.name == name {
			return rlimit{name, k.res, unix.Rlimit{Cur: n, Max: n + k.slack}}, true
		}
	}
	return rlimit{}, false
}

// rlimits returns the rlimits l sets, soft and hard (see rlimitKinds).
func (l Limits) rlimits() []rlimit {
	var out []rlimit
	for _, k := range rlimitKinds {
		if v := k.of(l); v > 0 {
			rl, _ := rlimitOf(k.name, uint64(v))
			out = append(out, rl)
		}
	}
	return out
}

// byPtrace reports whether the rlimits rls of cmd, which has not started,
// can be set by ptrace and prlimit; if not, the helper sets them. Without
// CAP_SYS_RESOURCE (which a container's root often lacks) prlimit may not
// raise a limit above the agent's own hard one; the helper may not either,
// and says so, so such a command is left to it. A program that is
// set-user-ID, set-group-ID or has file capabilities (`sudo`, `ping` run
// as the command itself, not through the shell) is left to the helper
// too: the kernel grants those to a program exec'd under PTRACE_TRACEME
// only if the tracee itself has CAP_SYS_PTRACE, which another user's
// child never has, nor a non-root agent's.
func (r *Runner) byPtrace(cmd *exec.Cmd, rls []rlimit) bool {
	if !r.Ptrace {
		return false
	}
	path := cmd.Path
	if !filepath.IsAbs(path) && cmd.Dir != "" {
		path = filepath.Join(cmd.Dir, path)
	}
	if gainsPrivilege(path) {
		return false
	}
	if r.caps.sysResource() {
		return true
	}
	for _, rl := range rls {
		var own unix.Rlimit
		if unix.Getrlimit(rl.res, &own) != nil || (own.Max != unix.RLIM_INFINITY && rl.lim.Max > own.Max) {
			return false
		}
	}
	return true
}

// gainsPrivilege reports whether running path may give the process
// privileges: a set-user-ID or set-group-ID file, or one with file
// capabilities. If path cannot be looked at, it says false: execve will
// fail on it, and say why.
func gainsPrivilege(path string) bool {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return false
	}
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		return true
	}
	_, err := unix.Getxattr(path, "security.capability", nil)
	return err == nil || !(errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP))
}

// startTraced starts p.cmd traced, sets rls on it in its stop after
// execve, and lets it go. If it cannot set them, it kills the command,
// waits for it and returns the error; the command never ran.
//
// prlimit on a process of another user needs CAP_SYS_RESOURCE, or the
// caller's real user and group ids to be the target's. Without the
// capability, a command of another user is started and released from a
// thread of its own that takes the command's ids (see tracerThread).
func (p *Process) startTraced(rls []rlimit) error {
	if cred := p.cmd.SysProcAttr.Credential; cred != nil && !p.runner.caps.sysResource() {
		errc := make(chan error, 1) // one slot: tracerThread never blocks on it
		go p.tracerThread(rls, cred, errc)
		return <-errc
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // only once the child is detached or dead
	return p.startAndRelease(rls, nil)
}

// tracerThread runs in its own goroutine; it ends once p.cmd has been
// started and released. It locks its goroutine to its OS thread and never
// unlocks it: the thread takes cred's ids (a thread's own, by the raw
// system calls), so it must end with the goroutine (the runtime then
// terminates it) rather than serve others. The child it started is then
// the child of another of the agent's threads, and is waited for as any.
// (A Pdeathsig, which the Runner never sets, would fire at that moment.)
func (p *Process) tracerThread(rls []rlimit, cred *syscall.Credential, errc chan<- error) {
	runtime.LockOSThread()
	errc <- p.startAndRelease(rls, cred)
}

// startAndRelease starts p.cmd traced and releases it with rls, taking
// the ids of as first if it is not nil. The calling goroutine must be
// locked to its thread.
func (p *Process) startAndRelease(rls []rlimit, as *syscall.Credential) error {
	p.cmd.SysProcAttr.Ptrace = true
	mask, err := forkBlocked(p.startUntraced)
	if err != nil {
		return err
	}
	if as != nil {
		err = becomeReal(as)
	}
	if err == nil {
		_, err = releaseTraced(p.cmd.Process.Pid, rls, mask)
	}
	if err == nil {
		return nil
	}
	_ = p.cmd.Process.Kill() // SIGKILL ends a stopped tracee too
	_ = p.cmd.Wait()
	if p.runner.Reaper != nil {
		p.runner.Reaper.Done(p.cmd.Process.Pid)
	}
	return fmt.Errorf("setting the command's limits: %w", err)
}

// becomeReal gives the calling thread, and it alone, cred's user and group
// ids: real, effective and saved, group first (a thread that is no longer
// root may not change it). unix.Setresuid would change every thread of
// the agent. SYS_SETRESUID takes 32-bit ids on amd64 and arm64.
func becomeReal(cred *syscall.Credential) error {
	g, u := uintptr(cred.Gid), uintptr(cred.Uid)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, g, g, g); e != 0 {
		return fmt.Errorf("setresgid %d: %w", cred.Gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, u, u, u); e != 0 {
		return fmt.Errorf("setresuid %d: %w", cred.Uid, e)
	}
	return nil
}

// forkBlocked calls start, which forks the traced child, with every signal
// but the synchronous ones (which the thread's own faults raise, and
// SIGTRAP, the stop's) blocked on this thread, and returns the thread's
// own mask, which the child must get back. If the mask cannot be changed,
// it calls start as it is and returns a nil mask.
func forkBlocked(start func() error) (*unix.Sigset_t, error) {
	var set, old unix.Sigset_t
	for i := range set.Val {
		set.Val[i] = ^uint64(0)
	}
	synchronous := []syscall.Signal{syscall.SIGTRAP, syscall.SIGSEGV, syscall.SIGBUS,
		syscall.SIGFPE, syscall.SIGILL, syscall.SIGSYS}
	for _, sig := range synchronous {
		set.Val[(sig-1)/64] &^= 1 << ((sig - 1) % 64)
	}
	if unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old) != nil {
		return nil, start()
	}
	err := start()
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return &old, err
}

// releaseTraced waits for pid, a child this thread started with
// SysProcAttr.Ptrace, to stop after its execve, sets rls on it, gives it
// mask as its signal mask if mask is not nil (see forkBlocked) and
// detaches, so that it runs untraced. It reports whether the child
// stopped; one that exited first (killed before its first instruction) is
// left unreaped, for its Wait. The calling goroutine must be locked to
// the thread that started pid.
func releaseTraced(pid int, rls []rlimit, mask *unix.Sigset_t) (stopped bool, err error) {
	code, status, err := peekChild(pid)
	if err != nil {
		return false, err
	}
	if code != cldTrapped && code != cldStopped {
		return false, nil
	}
	for _, rl := range rls {
		if err := unix.Prlimit(pid, rl.res, &rl.lim, nil); err != nil {
			if errors.Is(err, unix.ESRCH) {
				return true, nil // killed meanwhile: nothing left to limit
			}
			return true, fmt.Errorf("%s: %w", rl.name, err)
		}
	}
	if mask != nil {
		// The kernel's sigset_t is 8 bytes, the first of Val.
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SETSIGMASK, uintptr(pid), 8,
			uintptr(unsafe.Pointer(&mask.Val[0])), 0, 0)
		if e == unix.ESRCH {
			return true, nil
		}
		if e != 0 {
			return true, fmt.Errorf("restoring the signal mask: %w", e)
		}
	}
	// The stop's own signal is execve's SIGTRAP, suppressed. Any other
	// (a signal that came first) is handed back, so that it is delivered
	// once the child runs.
	sig := 0
	if syscall.Signal(status) != syscall.SIGTRAP {
		sig = status
	}
	return true, ptraceDetach(pid, sig)
}

// ptraceDetach detaches from pid, delivering sig (if not 0) to it. A
// child gone meanwhile (ESRCH: killed, so no longer in its stop) is not
// an error.
func ptraceDetach(pid, sig int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(sig), 0, 0)
	if e != 0 && e != unix.ESRCH {
		return fmt.Errorf("detaching: %w", e)
	}
	return nil
}

// peekChild waits until pid stops or exits, without reaping it or
// consuming the stop, and returns si_code (CLD_TRAPPED, CLD_EXITED ...)
// and si_status.
func peekChild(pid int) (code, status int, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return 0, 0, err
	}
	return int(info.Code), siginfoStatus(&info), nil
}

// siginfoStatus returns si_status: for SIGCHLD it follows si_pid and
// si_uid at the union's offset (see siginfoPid).
func siginfoStatus(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	const off = (3*unsafe.Sizeof(int32(0)) + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off+2*unsafe.Sizeof(int32(0)))))
}

// ProbePtrace returns nil if commands' rlimits can be set by ptrace here
// (see Runner.Ptrace), and why not otherwise: seccomp, YAMA's
// ptrace_scope 3 or a missing capability refuse PTRACE_TRACEME or
// PTRACE_DETACH, and a blocked SIGTRAP means no stop. It starts helper,
// the agent's binary, as the rlimit helper with nothing to run (it exits
// at once), traced, sets its open-file limit and lets it go. Call it
// before a Reaper runs, which could reap the probe's child.
func ProbePtrace(helper string) error {
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil {
		return err
	}
	cmd := exec.Command(helper, HelperArg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Ptrace: true}
	cmd.Env = []string{}
	stopped, err := probeTraced(cmd, []rlimit{{"nofile", unix.RLIMIT_NOFILE, own}})
	if err != nil {
		return err
	}
	if !stopped {
		return errors.New("a traced child did not stop after its execve")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Exited() {
		return fmt.Errorf("the probe's child ended by %v", cmd.ProcessState)
	}
	return nil
}

// probeTraced starts cmd traced, releases it with rls, and waits for it.
func probeTraced(cmd *exec.Cmd, rls []rlimit) (bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mask, err := forkBlocked(cmd.Start)
	if err != nil {
		return false, err
	}
	stopped, err := releaseTraced(cmd.Process.Pid, rls, mask)
	if err != nil {
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
	return stopped, err
}

// capsReader reads the agent's effective capabilities once.
type capsReader struct {
	once     sync.Once
	resource bool
}

// sysResource reports whether the agent has CAP_SYS_RESOURCE.
func (c *capsReader) sysResource() bool {
	c.once.Do(func() {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3, Pid: 0} // this thread; the agent's threads share their capabilities
		var data [2]unix.CapUserData
		if unix.Capget(&hdr, &data[0]) == nil {
			c.resource = data[unix.CAP_SYS_RESOURCE/32].Effective&(1<<(unix.CAP_SYS_RESOURCE%32)) != 0
		}
	})
	return c.resource
}
