package stats

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRoot writes files (path → content, paths absolute as on a real
// system) under a temporary directory and returns it, for newReader.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
}

const meminfo = "MemTotal:       8000 kB\nMemFree:        1000 kB\nMemAvailable:   6000 kB\n"

// /proc/stat's cpu line: user nice system idle iowait irq softirq steal.
const procStat = "cpu  100 20 30 5000 70 1 2 3 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"

func TestCgroupV2(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"/proc/self/mountinfo":                    "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
		"/proc/self/cgroup":                       "0::/\n",
		"/proc/meminfo":                           meminfo,
		"/sys/fs/cgroup/cpu.stat":                 "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
		"/sys/fs/cgroup/cpu.max":                  "150000 100000\n",
		"/sys/fs/cgroup/memory.current":           "1048576\n",
		"/sys/fs/cgroup/memory.max":               "4194304\n",
		"/sys/fs/cgroup/unrelated/memory.current": "1\n",
	})
	r := newReader(t.TempDir(), root)
	c, err := r.CPU()
	require.NoError(t, err)
	assert.Equal(t, CPU{UsageSeconds: 2.5, LimitCores: min(1.5, float64(runtime.NumCPU())), Source: SourceCgroup2}, c)
	m, err := r.Memory()
	require.NoError(t, err)
	assert.Equal(t, Memory{Used: 1 << 20, Limit: 4 << 20, Source: SourceCgroup2}, m)
}

// Without a limit, the cgroup's memory limit is the machine's memory, and
// its CPU limit the CPUs the agent may use.
func TestCgroupV2NoLimits(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"/proc/self/mountinfo": "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"/proc/self/cgroup":    "0::/user.slice/agent.scope\n",
		"/proc/meminfo":        meminfo,
		"/sys/fs/cgroup/user.slice/agent.scope/cpu.stat":       "usage_usec 7\n",
		"/sys/fs/cgroup/user.slice/agent.scope/cpu.max":        "max 100000\n",
		"/sys/fs/cgroup/user.slice/agent.scope/memory.current": "4096\n",
		"/sys/fs/cgroup/user.slice/agent.scope/memory.max":     "max\n",
	})
	r := newReader(t.TempDir(), root)
	c, err := r.CPU()
	require.NoError(t, err)
	assert.Equal(t, CPU{UsageSeconds: 7e-6, LimitCores: float64(runtime.NumCPU()), Source: SourceCgroup2}, c)
	m, err := r.Memory()
	require.NoError(t, err)
	assert.Equal(t, Memory{Used: 4096, Limit: 8000 << 10, Source: SourceCgroup2}, m)
}

// A limit above the machine's memory is the machine's memory.
func TestCgroupV1(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"/proc/self/mountinfo": "" +
			"31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
			"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n" +
			"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
		"/proc/self/cgroup": "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n",
		"/proc/meminfo":     meminfo,
		"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage":     "3000000000\n",
		"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "50000\n",
		"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
		"/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes":  "2048\n",
		"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes":  "9223372036854771712\n",
		"/sys/fs/cgroup/unified/cpu.stat":                         "usage_usec 1\n",
	})
	r := newReader(t.TempDir(), root)
	c, err := r.CPU()
	require.NoError(t, err)
	assert.Equal(t, CPU{UsageSeconds: 3, LimitCores: 0.5, Source: SourceCgroup1}, c)
	m, err := r.Memory()
	require.NoError(t, err)
	assert.Equal(t, Memory{Used: 2048, Limit: 8000 << 10, Source: SourceCgroup1}, m)
}

// A container without a cgroup namespace sees its own cgroup mounted at the
// top, under a path from the host's view that is not there.
func TestCgroupMountedAtTop(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"/proc/self/mountinfo":                         "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
		"/proc/self/cgroup":                            "4:memory:/docker/abc\n",
		"/proc/meminfo":                                meminfo,
		"/sys/fs/cgroup/memory/memory.usage_in_bytes":  "2048\n",
		"/sys/fs/cgroup/memory/memory.limit_in_bytes":  "4096\n",
		"/sys/fs/cgroup/memory/docker/other/unrelated": "\n",
	})
	m, err := newReader(t.TempDir(), root).Memory()
	require.NoError(t, err)
	assert.Equal(t, Memory{Used: 2048, Limit: 4096, Source: SourceCgroup1}, m)
}

// Without a cgroup, or with one that has no memory controller (the root of
// a cgroup v2 hierarchy has no memory.current), /proc speaks for the whole
// machine.
func TestProcFallback(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no cgroup": {"/proc/self/mountinfo": "", "/proc/self/cgroup": ""},
		"v2 root without memory.current": {
			"/proc/self/mountinfo":   "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			"/proc/self/cgroup":      "0::/\n",
			"/sys/fs/cgroup/cpu.max": "max 100000\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			files["/proc/meminfo"], files["/proc/stat"] = meminfo, procStat
			r := newReader(t.TempDir(), fakeRoot(t, files))
			c, err := r.CPU()
			require.NoError(t, err)
			assert.Equal(t, CPU{UsageSeconds: 1.56, LimitCores: float64(runtime.NumCPU()), Source: SourceProc}, c)
			m, err := r.Memory()
			require.NoError(t, err)
			assert.Equal(t, Memory{Used: 2000 << 10, Limit: 8000 << 10, Source: SourceProc}, m)
		})
	}
}

func TestNothingReadable(t *testing.T) {
	r := newReader(filepath.Join(t.TempDir(), "gone"), t.TempDir())
	_, err := r.CPU()
	assert.Error(t, err)
	_, err = r.Memory()
	assert.Error(t, err)
	_, err = r.Disk()
	assert.Error(t, err)
	_, err = r.AgentRSS()
	assert.Error(t, err)
}

func TestMalformed(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"/proc/self/mountinfo": "garbage\n30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"/proc/self/cgroup":    "nonsense\n0::/\n",
		"/proc/meminfo":        "MemTotal: lots\n",
		"/proc/stat":           "intr 1 2 3\n",
		"/proc/self/statm":     "12\n",
	})
	r := newReader(t.TempDir(), root)
	_, err := r.CPU()
	assert.Error(t, err)
	_, err = r.Memory()
	assert.Error(t, err)
	_, err = r.AgentRSS()
	assert.Error(t, err)
}

// On the machine the tests run on, every reading works and is sane.
func TestRealSystem(t *testing.T) {
	dir := t.TempDir()
	r := New(dir)
	c, err := r.CPU()
	require.NoError(t, err)
	assert.Positive(t, c.UsageSeconds)
	assert.Positive(t, c.LimitCores)
	assert.LessOrEqual(t, c.LimitCores, float64(runtime.NumCPU()))
	m, err := r.Memory()
	require.NoError(t, err)
	assert.Positive(t, m.Used)
	assert.GreaterOrEqual(t, m.Limit, m.Used)
	d, err := r.Disk()
	require.NoError(t, err)
	assert.Equal(t, dir, d.Path)
	assert.Positive(t, d.Size)
	assert.LessOrEqual(t, d.Used+d.Free, d.Size)
	rss, err := r.AgentRSS()
	require.NoError(t, err)
	assert.Greater(t, rss, uint64(1<<20))
	t.Logf("cpu %+v, memory %+v, disk %+v, rss %d", c, m, d, rss)
}
