package executor

import (
	"bytes"
	"os"
	"strconv"
)

// procStat is what the executor reads of a process in /proc.
type procStat struct {
	pid     int
	state   byte // 'R', 'S', ... 'Z' for a zombie
	pgrp    int
	session int
}

// live reports whether the process is neither a zombie nor dead.
func (s procStat) live() bool { return s.state != 'Z' && s.state != 'X' }

// parseStat parses the text of /proc/<pid>/stat. The command name, in
// parentheses, may itself hold spaces and parentheses, so the fields are
// counted from the last ')': state, ppid, pgrp, session.
func parseStat(b []byte) (procStat, bool) {
	var s procStat
	pid, _, _ := bytes.Cut(b, []byte(" "))
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return s, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 4 || len(f[0]) != 1 {
		return s, false
	}
	var err1, err2, err3 error
	s.pid, err1 = strconv.Atoi(string(pid))
	s.state = f[0][0]
	s.pgrp, err2 = strconv.Atoi(string(f[2]))
	s.session, err3 = strconv.Atoi(string(f[3]))
	return s, err1 == nil && err2 == nil && err3 == nil
}

// liveProcs calls fn with every live process in /proc, until fn returns
// false; a process that ends meanwhile is skipped. It reports whether
// /proc could be read: if not, fn was never called.
func liveProcs(fn func(procStat) bool) bool {
	dir, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return false
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		if s, ok := parseStat(b); ok && s.live() && !fn(s) {
			break
		}
	}
	return true
}

// procIsOurs reports whether /proc shows this PID namespace: its "self"
// has our pid. (One small read; it is asked only when a group or a
// session is to be looked into.)
func procIsOurs() bool {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return false
	}
	pid, _, _ := bytes.Cut(b, []byte(" "))
	return string(pid) == strconv.Itoa(os.Getpid())
}
