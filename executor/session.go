package executor

import (
	"errors"
	"syscall"
)

// sessionKillRounds bounds how many times SignalSession scans the session
// again after a SIGKILL: a process forked while a scan ran may be missed
// by it (a directory read is not a snapshot), and is found by the next.
const sessionKillRounds = 20

// SignalSession sends sig to every process of the session that p leads (a
// process started by StartTTY): the leader and every job an interactive
// shell put in a process group of its own, with all their descendants
// that did not leave the session (setsid). It returns how many processes
// it signalled. For SIGKILL it scans again until no live member is left,
// a bounded number of times, so that a process forked during the kill is
// not missed.
//
// Members are found through /proc. Where /proc is not this PID
// namespace's, only the leader's process group can be reached, and is.
//
// Once the leader has been reaped and the session has no live member, the
// session's number may be someone else's: nothing is signalled, and the
// error is ErrFinished.
func (p *Process) SignalSession(sig syscall.Signal) (int, error) {
	sid := p.Pid()
	if !procIsOurs() {
		if err := p.Signal(sig); err != nil {
			return 0, err
		}
		return 1, nil
	}
	signalled := map[int]bool{}
	for round := 0; round < sessionKillRounds; round++ {
		// The number is ours while the leader is not reaped, or while
		// no process has it as its pid: a session's number stays taken
		// while the session has members, so a process that holds it is
		// a new one, after ours emptied.
		if p.reaped.Load() && !errors.Is(syscall.Kill(sid, 0), syscall.ESRCH) {
			break
		}
		pids := sessionMembers(sid)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, sig); err == nil {
				signalled[pid] = true
			}
		}
		if sig != syscall.SIGKILL {
			break
		}
	}
	if len(signalled) == 0 && p.reaped.Load() {
		return 0, ErrFinished
	}
	return len(signalled), nil
}

// sessionMembers returns the pids of the live (not zombie) processes of
// session sid, read from /proc.
func sessionMembers(sid int) []int {
	var pids []int
	liveProcs(func(s procStat) bool {
		if s.session == sid {
			pids = append(pids, s.pid)
		}
		return true
	})
	return pids
}
