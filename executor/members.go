package executor

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// hasLiveMembers reports whether process group pgid has a member that is
// not a zombie. kill(-pgid, 0) answers for zombies too: a grandchild
// killed a moment ago stays in its group until whoever inherited it reaps
// it, which may take a while, or forever under an init that never reaps.
// So when the group answers, /proc says whether anyone in it is alive;
// where /proc is not this PID namespace's (a container without its own
// /proc mount), kill's answer stands.
func hasLiveMembers(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	alive, ok := procGroupAlive(pgid)
	return alive || !ok
}

// procIsOurs reports whether /proc shows this PID namespace: its "self"
// has our pid. (One small read; it is asked only when a group answers.)
func procIsOurs() bool {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return false
	}
	pid, _, _ := bytes.Cut(b, []byte(" "))
	return string(pid) == strconv.Itoa(os.Getpid())
}

// procGroupAlive reports whether a process that is not a zombie has
// process group pgid, by reading /proc; ok is false if /proc cannot tell.
func procGroupAlive(pgid int) (alive, ok bool) {
	if !procIsOurs() {
		return false, false
	}
	dir, err := os.Open("/proc")
	if err != nil {
		return false, false
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return false, false
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		if state, pgrp, ok := statStateGroup(b); ok && pgrp == pgid && state != 'Z' && state != 'X' {
			return true, true
		}
	}
	return false, true
}

// statStateGroup returns the state and process group from the text of
// /proc/<pid>/stat. The command name, in parentheses, may itself hold
// spaces and parentheses, so fields are counted from the last ')':
// state, ppid, pgrp.
func statStateGroup(b []byte) (state byte, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	return f[0][0], pgrp, err == nil
}
