package server

import (
	"net/http"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"syscall"
	"time"
)

// metricsContentType is the Prometheus text format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// handleMetrics serves GET /metrics: the agent's metrics in the Prometheus
// text format, version 0.0.4, every value read now. It needs the token
// unless Config.MetricsOpen.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	e := &exposition{b: make([]byte, 0, 16<<10)}
	s.metrics.writeRequests(e)
	s.writeState(e)
	s.writeResources(e)
	s.writeProcess(e)
	w.Header().Set("Content-Type", metricsContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(e.b) // an error here means the client left
	return nil
}

// statsReply is the body of GET /stats. A resource that could not be read
// is null.
type statsReply struct {
	Time   time.Time    `json:"time"`
	CPU    *cpuStats    `json:"cpu"`
	Memory *memoryStats `json:"memory"`
	Disk   *diskStats   `json:"disk"`
	Agent  agentStats   `json:"agent"`
}

type cpuStats struct {
	UsageSeconds float64 `json:"usage_seconds"`
	LimitCores   float64 `json:"limit_cores"`
	Source       string  `json:"source"`
}

type memoryStats struct {
	UsedBytes  uint64  `json:"used_bytes"`
	LimitBytes *uint64 `json:"limit_bytes"` // null if unknown
	Source     string  `json:"source"`
}

type diskStats struct {
	Path      string `json:"path"`
	UsedBytes uint64 `json:"used_bytes"`
	FreeBytes uint64 `json:"free_bytes"`
	SizeBytes uint64 `json:"size_bytes"`
}

type agentStats struct {
	RSSBytes   *uint64 `json:"rss_bytes"` // null if unknown
	Goroutines int     `json:"goroutines"`
}

// handleStats serves GET /stats: the sandbox's resources as one JSON
// object, read now, for interfaces that poll. CPU time is cumulative: a
// poller divides its growth between two replies by the growth of time.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	reply := statsReply{Time: time.Now().UTC(), Agent: agentStats{Goroutines: runtime.NumGoroutine()}}
	if c, err := s.res.CPU(); err == nil {
		reply.CPU = &cpuStats{UsageSeconds: c.UsageSeconds, LimitCores: c.LimitCores, Source: c.Source}
	}
	if m, err := s.res.Memory(); err == nil {
		reply.Memory = &memoryStats{UsedBytes: m.Used, Source: m.Source}
		if m.Limit > 0 {
			reply.Memory.LimitBytes = &m.Limit
		}
	}
	if d, err := s.res.Disk(); err == nil {
		reply.Disk = &diskStats{Path: d.Path, UsedBytes: d.Used, FreeBytes: d.Free, SizeBytes: d.Size}
	}
	if rss, err := s.res.AgentRSS(); err == nil {
		reply.Agent.RSSBytes = &rss
	}
	encode(w, http.StatusOK, reply)
	return nil
}

// writeResources writes the sandbox's resources, as /stats gives them. A
// resource that cannot be read is left out.
func (s *Server) writeResources(e *exposition) {
	var cpuSource, memSource, diskPath string
	if c, err := s.res.CPU(); err == nil {
		e.one("sandbox_cpu_usage_seconds_total", typeCounter, "CPU time used by the sandbox's cgroup (or, without one, the machine), summed over CPUs.", c.UsageSeconds)
		e.one("sandbox_cpu_limit_cores", typeGauge, "CPUs' worth of time the sandbox may use: its cgroup's quota, at most the CPUs the agent may run on.", c.LimitCores)
		cpuSource = c.Source
	}
	if m, err := s.res.Memory(); err == nil {
		e.one("sandbox_memory_used_bytes", typeGauge, "Memory the sandbox's cgroup is charged, page cache included (without a cgroup: the machine's MemTotal less MemAvailable).", float64(m.Used))
		if m.Limit > 0 {
			e.one("sandbox_memory_limit_bytes", typeGauge, "The sandbox's memory limit: its cgroup's, at most the machine's memory.", float64(m.Limit))
		}
		memSource = m.Source
	}
	if d, err := s.res.Disk(); err == nil {
		e.one("sandbox_disk_used_bytes", typeGauge, "Bytes used on the file system of the agent's working directory.", float64(d.Used))
		e.one("sandbox_disk_free_bytes", typeGauge, "Bytes an unprivileged user may still write on the file system of the agent's working directory.", float64(d.Free))
		e.one("sandbox_disk_size_bytes", typeGauge, "Size of the file system of the agent's working directory.", float64(d.Size))
		diskPath = d.Path
	}
	const info = "sandbox_resources_info"
	e.family(info, typeGauge, "Where the resource metrics come from: cgroup2, cgroup1 or proc (the whole machine); and the directory whose file system the disk metrics describe.")
	e.sample(info, 1, label{"cpu_source", cpuSource}, label{"memory_source", memSource}, label{"disk_path", diskPath})
}

// goMetrics are the runtime/metrics samples writeProcess reports.
const (
	goHeapObjects = "/memory/classes/heap/objects:bytes"
	goTotal       = "/memory/classes/total:bytes"
	goGCCycles    = "/gc/cycles/total:gc-cycles"
)

// writeProcess writes the agent process's own resources, under the names
// Prometheus's client libraries give them.
func (s *Server) writeProcess(e *exposition) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		e.one("process_cpu_seconds_total", typeCounter, "Total user and system CPU time spent in seconds.", cpu.Seconds())
	}
	if rss, err := s.res.AgentRSS(); err == nil {
		e.one("process_resident_memory_bytes", typeGauge, "Resident memory size in bytes.", float64(rss))
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.one("process_open_fds", typeGauge, "Number of open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		e.one("process_max_fds", typeGauge, "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	e.one("process_start_time_seconds", typeGauge, "Start time of the process since unix epoch in seconds.", float64(s.started.UnixNano())/1e9)
	e.one("go_goroutines", typeGauge, "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	samples := []rtmetrics.Sample{{Name: goHeapObjects}, {Name: goTotal}, {Name: goGCCycles}}
	rtmetrics.Read(samples)
	for i, f := range []struct{ name, typ, help string }{
		{"go_memstats_heap_alloc_bytes", typeGauge, "Number of heap bytes allocated and currently in use."},
		{"go_memstats_sys_bytes", typeGauge, "Number of bytes obtained from system."},
		{"go_gc_cycles_total", typeCounter, "Number of completed garbage collection cycles."},
	} {
		if samples[i].Value.Kind() == rtmetrics.KindUint64 { // KindBad: a runtime without it
			e.one(f.name, f.typ, f.help, float64(samples[i].Value.Uint64()))
		}
	}
}
