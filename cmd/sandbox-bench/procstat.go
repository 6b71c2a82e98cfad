package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The agent is observed from outside, through /proc and the Go runtime's
// own gctrace lines: the bench never asks the agent about itself.

// procStatus returns the value of a "Key:" line of /proc/<pid>/status,
// which for VmRSS and VmHWM is in KiB.
func procStatus(pid int, key string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// rssMiB returns the agent's resident set size in MiB.
func (a *agent) rssMiB() float64 {
	kb, err := procStatus(a.pid, "VmRSS")
	if err != nil {
		return -1
	}
	return float64(kb) / 1024
}

// fds returns how many file descriptors the agent has open.
func (a *agent) fds() int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(a.pid) + "/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// threads returns the agent's OS thread count.
func (a *agent) threads() int {
	n, err := procStatus(a.pid, "Threads")
	if err != nil {
		return -1
	}
	return int(n)
}

// cpuTime returns the user and system CPU time the agent has used: see
// pidCPU.
func (a *agent) cpuTime() time.Duration { return pidCPU(a.pid) }

// pidCPU returns the user and system CPU time process pid has used, from
// /proc/<pid>/stat, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses: state is
	// the first, utime the 12th and stime the 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// selfCPU returns the user and system CPU time of the bench itself.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcTrace is the environment that makes the Go runtime print one line
// per garbage collection on stderr; the agent's code is not involved.
const gcTrace = "GODEBUG=gctrace=1"

// gcStat is what the last gctrace line of an agent started with gcTrace
// says.
type gcStat struct {
	cycles int     // collections so far
	liveMB float64 // heap live after the last collection
	goalMB float64 // heap size that triggers the next one
}

// gcStats parses the last gctrace line, such as
// "gc 12 @0.345s 1%: … ms cpu, 4->4->1 MB, 4 MB goal, …". It reports false
// if there is none yet.
func (a *agent) gcStats() (gcStat, bool) {
	log := a.log.String()
	i := strings.LastIndex(log, "\ngc ")
	if i < 0 {
		return gcStat{}, false
	}
	line, _, _ := strings.Cut(log[i+1:], "\n")
	var st gcStat
	f := strings.Fields(line)
	if len(f) < 2 {
		return st, false
	}
	st.cycles, _ = strconv.Atoi(f[1])
	for k, w := range f {
		if strings.Count(w, "->") == 2 && k+1 < len(f) && strings.HasPrefix(f[k+1], "MB") {
			parts := strings.Split(w, "->")
			st.liveMB, _ = strconv.ParseFloat(parts[2], 64)
		}
		if w == "goal," && k >= 2 {
			st.goalMB, _ = strconv.ParseFloat(f[k-2], 64)
		}
	}
	return st, true
}
