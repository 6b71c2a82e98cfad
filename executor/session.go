package executor

import (
	"bytes"
	"errors"
	"os"
	"strconv"
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
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil
	}
	var pids []int
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		state, session, ok := statStateSession(b)
		if !ok || session != sid || state == 'Z' || state == 'X' {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// statStateSession returns the state and session id from the text of
// /proc/<pid>/stat, counting fields from the last ')' as statStateGroup
// does: state, ppid, pgrp, session.
func statStateSession(b []byte) (state byte, session int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 4 || len(f[0]) != 1 {
		return 0, 0, false
	}
	session, err := strconv.Atoi(string(f[3]))
	return f[0][0], session, err == nil
}
