package server

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/sandbox-executor/sandbox-executor/stats"
)

// handleMetrics serves GET /metrics: the Prometheus text format (version
// 0.0.4) of the Server's own registry, gzipped when the scraper accepts
// it. Other formats are never negotiated, so the reply is always what the
// API document says; every Prometheus scraper accepts this one.
func (s *Server) handleMetrics() http.Handler {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{
		AcceptedFormats: []expfmt.Format{expfmt.NewFormat(expfmt.TypeTextPlain)},
		ErrorHandling:   promhttp.ContinueOnError, // a collector's error costs its metric, not the scrape
		ErrorLog:        promLogger{s},
	})
	return h
}

// promLogger logs promhttp's errors as warnings.
type promLogger struct{ s *Server }

func (l promLogger) Println(v ...any) {
	l.s.log.Warn().Msg(strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
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

// resourceCollector reports the sandbox's resources, read at scrape time.
// A resource that cannot be read is left out of that scrape.
type resourceCollector struct {
	r *stats.Reader

	cpuUsage, cpuLimit, memUsed, memLimit, diskUsed, diskFree, diskSize, info *prometheus.Desc
}

func newResourceCollector(r *stats.Reader) *resourceCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &resourceCollector{
		r:        r,
		cpuUsage: d("sandbox_cpu_usage_seconds_total", "CPU time used by the sandbox's cgroup (or, without one, the machine), summed over CPUs."),
		cpuLimit: d("sandbox_cpu_limit_cores", "CPUs' worth of time the sandbox may use: its cgroup's quota, at most the CPUs the agent may run on."),
		memUsed:  d("sandbox_memory_used_bytes", "Memory the sandbox's cgroup is charged, page cache included (without a cgroup: the machine's MemTotal less MemAvailable)."),
		memLimit: d("sandbox_memory_limit_bytes", "The sandbox's memory limit: its cgroup's, at most the machine's memory."),
		diskUsed: d("sandbox_disk_used_bytes", "Bytes used on the file system of the agent's working directory."),
		diskFree: d("sandbox_disk_free_bytes", "Bytes an unprivileged user may still write on the file system of the agent's working directory."),
		diskSize: d("sandbox_disk_size_bytes", "Size of the file system of the agent's working directory."),
		info: d("sandbox_resources_info", "Where the resource metrics come from: cgroup2, cgroup1 or proc (the whole machine); and the directory whose file system the disk metrics describe.",
			"cpu_source", "memory_source", "disk_path"),
	}
}

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpuUsage, c.cpuLimit, c.memUsed, c.memLimit, c.diskUsed, c.diskFree, c.diskSize, c.info} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	var cpuSource, memSource, diskPath string
	if cpu, err := c.r.CPU(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.cpuUsage, prometheus.CounterValue, cpu.UsageSeconds)
		gauge(c.cpuLimit, cpu.LimitCores)
		cpuSource = cpu.Source
	}
	if m, err := c.r.Memory(); err == nil {
		gauge(c.memUsed, float64(m.Used))
		if m.Limit > 0 {
			gauge(c.memLimit, float64(m.Limit))
		}
		memSource = m.Source
	}
	if d, err := c.r.Disk(); err == nil {
		gauge(c.diskUsed, float64(d.Used))
		gauge(c.diskFree, float64(d.Free))
		gauge(c.diskSize, float64(d.Size))
		diskPath = d.Path
	}
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, cpuSource, memSource, diskPath)
}
