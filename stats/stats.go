// Package stats reads what the sandbox uses of its machine: CPU time and
// memory, with their limits, from the cgroup the agent runs in when there
// is one and else from /proc; the space of a directory's file system; and
// the agent's own resident memory. Every reading is taken when it is asked
// for: nothing runs in the background. It knows nothing of HTTP; the
// server turns the readings into /metrics and /stats.
package stats

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sources of a reading, as CPU.Source and Memory.Source name them.
const (
	SourceCgroup2 = "cgroup2" // the cgroup v2 the agent runs in
	SourceCgroup1 = "cgroup1" // the cgroup v1 controller the agent runs in
	SourceProc    = "proc"    // the whole machine, from /proc
)

// ErrUnavailable is returned for a reading that no source could give, such
// as CPU time without /proc.
var ErrUnavailable = errors.New("not available on this system")

// CPU is the CPU time used by the sandbox.
type CPU struct {
	// UsageSeconds is the CPU time used since the cgroup (or, from /proc,
	// the machine) started, summed over every CPU.
	UsageSeconds float64
	// LimitCores is how many CPUs' worth of time the sandbox may use: the
	// cgroup's quota, or the CPUs the agent may run on if that is fewer or
	// there is no quota.
	LimitCores float64
	Source     string // SourceCgroup2, SourceCgroup1 or SourceProc
}

// Memory is the memory used by the sandbox.
type Memory struct {
	// Used is what the cgroup charges (page cache included), or from /proc
	// MemTotal less MemAvailable.
	Used uint64
	// Limit is the cgroup's limit, or the machine's memory if that is
	// lower or there is no limit; 0 if neither is known.
	Limit  uint64
	Source string // SourceCgroup2, SourceCgroup1 or SourceProc
}

// Disk is the space of one file system.
type Disk struct {
	Path string // the directory whose file system it is
	Used uint64 // bytes in use
	Free uint64 // bytes an unprivileged user may still write
	Size uint64 // bytes in all
}

// Reader reads the sandbox's resources. Create it with New; it is safe for
// concurrent use.
type Reader struct {
	dir  string // whose file system Disk reads
	root string // prefixed to /proc and /sys paths; "" but in tests
	// The cgroup directories found by New; "" if there is none. A
	// directory found once stays: the agent does not change cgroups.
	cpuacct1, cpu1, mem1, unified string
}

// New returns a Reader of the cgroup the agent runs in and of the file
// system that holds dir.
func New(dir string) *Reader { return newReader(dir, "") }

func newReader(dir, root string) *Reader {
	r := &Reader{dir: dir, root: root}
	r.findCgroups()
	return r
}

// CPU reads the CPU time used: from the cgroup v1 cpuacct controller if
// it is mounted, else from the cgroup v2, else from /proc/stat.
func (r *Reader) CPU() (CPU, error) {
	c := CPU{LimitCores: r.cpuLimit()}
	var err error
	switch {
	case r.cpuacct1 != "":
		var ns uint64
		ns, err = readUint(filepath.Join(r.cpuacct1, "cpuacct.usage"))
		c.UsageSeconds, c.Source = float64(ns)/1e9, SourceCgroup1
	case r.unified != "":
		var us uint64
		us, err = readKey(filepath.Join(r.unified, "cpu.stat"), "usage_usec")
		c.UsageSeconds, c.Source = float64(us)/1e6, SourceCgroup2
	default:
		err = ErrUnavailable
	}
	if err == nil {
		return c, nil
	}
	c.UsageSeconds, err = r.procCPU()
	c.Source = SourceProc
	return c, err
}

// userHZ is the unit of /proc/stat's times. It is 100 on every Linux
// architecture Go supports; only sysconf(_SC_CLK_TCK), which needs cgo,
// could say otherwise.
const userHZ = 100

// procCPU sums the busy times of /proc/stat's "cpu" line: user, nice,
// system, irq, softirq and steal (guest time is already in user).
func (r *Reader) procCPU() (float64, error) {
	b, err := os.ReadFile(r.root + "/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("/proc/stat: no cpu line")
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}

// cpuLimit returns the cgroup's CPU quota in CPUs, at most the CPUs the
// agent may run on.
func (r *Reader) cpuLimit() float64 {
	cpus := float64(runtime.NumCPU())
	quota, period := -1.0, 0.0
	switch {
	case r.cpu1 != "":
		if q, err := readInt(filepath.Join(r.cpu1, "cpu.cfs_quota_us")); err == nil && q > 0 {
			quota = float64(q)
			if p, err := readInt(filepath.Join(r.cpu1, "cpu.cfs_period_us")); err == nil {
				period = float64(p)
			}
		}
	case r.unified != "":
		// cpu.max is "max 100000" without a quota, "50000 100000" with.
		if b, err := os.ReadFile(filepath.Join(r.unified, "cpu.max")); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				q, qerr := strconv.ParseFloat(f[0], 64)
				p, perr := strconv.ParseFloat(f[1], 64)
				if qerr == nil && perr == nil {
					quota, period = q, p
				}
			}
		}
	}
	if quota > 0 && period > 0 {
		return min(quota/period, cpus)
	}
	return cpus
}

// unlimited is where cgroup v1 memory limits start to mean none: the
// kernel reports "no limit" as the largest page-aligned int64.
const unlimited = 1 << 62

// Memory reads the memory used and its limit: from the cgroup v1 memory
// controller if it is mounted, else from the cgroup v2 (which has no
// memory.current at its root), else from /proc/meminfo.
func (r *Reader) Memory() (Memory, error) {
	total, available, merr := r.meminfo()
	var m Memory
	var used, limit uint64
	var err error
	switch {
	case r.mem1 != "":
		used, err = readUint(filepath.Join(r.mem1, "memory.usage_in_bytes"))
		if err == nil {
			limit, _ = readUint(filepath.Join(r.mem1, "memory.limit_in_bytes"))
			m.Source = SourceCgroup1
		}
	case r.unified != "":
		used, err = readUint(filepath.Join(r.unified, "memory.current"))
		if err == nil {
			limit, _ = readUint(filepath.Join(r.unified, "memory.max")) // "max" fails: no limit
			m.Source = SourceCgroup2
		}
	default:
		err = ErrUnavailable
	}
	if err != nil {
		if merr != nil {
			return Memory{}, merr
		}
		return Memory{Used: total - min(available, total), Limit: total, Source: SourceProc}, nil
	}
	m.Used = used
	if limit >= unlimited {
		limit = 0
	}
	if total > 0 && (limit == 0 || total < limit) {
		limit = total
	}
	m.Limit = limit
	return m, nil
}

// meminfo returns MemTotal and MemAvailable, in bytes.
func (r *Reader) meminfo() (total, available uint64, err error) {
	b, err := os.ReadFile(r.root + "/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	var seen int
	for line := range strings.Lines(string(b)) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if key == "MemTotal" {
			total = kb << 10
		} else {
			available = kb << 10
		}
		seen++
	}
	if seen < 2 {
		return 0, 0, errors.New("/proc/meminfo: no MemTotal or MemAvailable")
	}
	return total, available, nil
}

// Disk reads the space of the file system that holds the Reader's
// directory.
func (r *Reader) Disk() (Disk, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(r.dir, &st); err != nil {
		return Disk{}, err
	}
	bsize := uint64(st.Frsize) // what df uses; Bsize is the preferred I/O size
	if bsize == 0 {
		bsize = uint64(st.Bsize)
	}
	return Disk{
		Path: r.dir,
		Used: (st.Blocks - st.Bfree) * bsize,
		Free: st.Bavail * bsize,
		Size: st.Blocks * bsize,
	}, nil
}

// AgentRSS reads the agent's own resident memory, in bytes.
func (r *Reader) AgentRSS() (uint64, error) {
	b, err := os.ReadFile(r.root + "/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, errors.New("/proc/self/statm: too short")
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * uint64(os.Getpagesize()), nil
}

// readUint reads a file that holds one unsigned number.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// readInt reads a file that holds one number, which may be negative.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKey reads the number under key in a file of "key value" lines, such
// as cpu.stat.
func readKey(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == key {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New(path + ": no " + key)
}
