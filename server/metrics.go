package server

import (
	"cmp"
	"net/http"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/internal/promtext"
)

// routeUnmatched is the route label of a request that matched no route: an
// unknown path, or a known one with another method. Labels stay bounded
// whatever paths clients send.
const routeUnmatched = "unmatched"

// The route labels of the requests served in front of the router: CONNECT
// tunnels, and previews by host name (the app's requests, whatever their
// path).
const (
	routeConnect     = "CONNECT"
	routeHostPreview = "host preview"
)

// codeAborted is the code label of a request whose handler gave up with a
// panic (http.ErrAbortHandler) before sending a status.
const codeAborted = "aborted"

// durationBounds are the upper bounds, in seconds, of the request
// duration histogram's buckets: from a /health to a long event stream.
// Nothing writes it.
var durationBounds = [...]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// metrics holds the counts /metrics reports that are not read from the
// agent's parts at scrape time: requests, and event streams. A request
// costs a read lock, to find its counters, and atomic adds.
type metrics struct {
	// mu guards requests and durations. The maps only grow, by one entry
	// the first time a set of labels is seen; the counters in them are
	// atomics, added to under the read lock.
	mu        sync.RWMutex
	requests  map[requestKey]*atomic.Uint64
	durations map[routeKey]*histogram

	inFlight     atomic.Int64  // requests being served
	streamsOpen  atomic.Int64  // event streams open now
	streamsTotal atomic.Uint64 // event streams opened
	streamBytes  atomic.Uint64 // bytes written to event streams
}

// requestKey labels a request counter. status 0 is codeAborted.
type requestKey struct {
	route, method string
	status        int
}

// routeKey labels a duration histogram.
type routeKey struct{ route, method string }

// histogram counts durations per bucket of durationBounds; the last count
// is the +Inf bucket.
type histogram struct {
	counts [len(durationBounds) + 1]atomic.Uint64
	sumNS  atomic.Uint64 // the sum of the durations, in nanoseconds
}

func newMetrics() *metrics {
	return &metrics{requests: map[requestKey]*atomic.Uint64{}, durations: map[routeKey]*histogram{}}
}

// observe records a served request.
func (m *metrics) observe(route, method string, status int, took time.Duration) {
	rk := requestKey{route, methodLabel(method), status}
	dk := routeKey{rk.route, rk.method}
	m.mu.RLock()
	n, h := m.requests[rk], m.durations[dk]
	m.mu.RUnlock()
	if n == nil || h == nil {
		m.mu.Lock()
		if n = m.requests[rk]; n == nil {
			n = new(atomic.Uint64)
			m.requests[rk] = n
		}
		if h = m.durations[dk]; h == nil {
			h = new(histogram)
			m.durations[dk] = h
		}
		m.mu.Unlock()
	}
	n.Add(1)
	s := took.Seconds()
	i := 0
	for i < len(durationBounds) && s > durationBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNS.Add(uint64(max(took, 0)))
}

// methodLabel returns method if it is one of HTTP's, else "other": a
// client could send any token as a method.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// handleMetrics serves GET /metrics: the agent's metrics in the Prometheus
// text format, version 0.0.4, every value read now. It needs the token
// unless Config.MetricsOpen.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	e := promtext.NewWriter(16 << 10)
	s.metrics.writeRequests(e)
	s.writeState(e)
	s.writeResources(e)
	s.writeProcess(e)
	w.Header().Set("Content-Type", promtext.ContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(e.Bytes()) // an error here means the client left
	return nil
}

// writeRequests writes the request families, their samples in a stable
// order.
func (m *metrics) writeRequests(e *promtext.Writer) {
	type req struct {
		k requestKey
		n uint64
	}
	type dur struct {
		k      routeKey
		counts []uint64
		sum    float64
	}
	m.mu.RLock()
	reqs := make([]req, 0, len(m.requests))
	for k, n := range m.requests {
		reqs = append(reqs, req{k, n.Load()})
	}
	durs := make([]dur, 0, len(m.durations))
	for k, h := range m.durations {
		d := dur{k: k, counts: make([]uint64, len(h.counts)), sum: float64(h.sumNS.Load()) / 1e9}
		for i := range h.counts {
			d.counts[i] = h.counts[i].Load()
		}
		durs = append(durs, d)
	}
	m.mu.RUnlock()
	slices.SortFunc(reqs, func(a, b req) int {
		return cmp.Or(cmp.Compare(a.k.route, b.k.route), cmp.Compare(a.k.method, b.k.method), cmp.Compare(a.k.status, b.k.status))
	})
	slices.SortFunc(durs, func(a, b dur) int {
		return cmp.Or(cmp.Compare(a.k.route, b.k.route), cmp.Compare(a.k.method, b.k.method))
	})

	const requests = "sandbox_http_requests_total"
	e.Family(requests, promtext.Counter, `API requests served, by route template ("unmatched" for none), method and status code ("aborted" if none was sent).`)
	for _, r := range reqs {
		code := codeAborted
		if r.k.status != 0 {
			code = strconv.Itoa(r.k.status)
		}
		e.Sample(requests, float64(r.n), promtext.Label{Name: "route", Value: r.k.route},
			promtext.Label{Name: "method", Value: r.k.method}, promtext.Label{Name: "code", Value: code})
	}
	const duration = "sandbox_http_request_duration_seconds"
	e.Family(duration, promtext.Histogram, "Time from a request's arrival to the end of its reply (of the whole stream, for event streams), by route template and method.")
	for _, d := range durs {
		e.Histogram(duration, durationBounds[:], d.counts, d.sum,
			promtext.Label{Name: "route", Value: d.k.route}, promtext.Label{Name: "method", Value: d.k.method})
	}
	e.One("sandbox_http_requests_in_flight", promtext.Gauge, "API requests being served now, event streams included.", float64(m.inFlight.Load()))
}

// writeState writes the state of the agent's parts, read now.
func (s *Server) writeState(e *promtext.Writer) {
	running, limit := s.runner.Running()
	e.One("sandbox_commands_running", promtext.Gauge, "Commands running now, of every kind: /run, /run_streaming and background processes.", float64(running))
	e.One("sandbox_commands_limit", promtext.Gauge, "The cap on commands running at once; past it, 503.", float64(limit))

	ps := s.procs.Stats()
	e.One("sandbox_processes_running", promtext.Gauge, "Background processes running now.", float64(ps.Running))
	e.One("sandbox_processes_finished", promtext.Gauge, "Finished background processes still listed.", float64(ps.Finished))
	e.One("sandbox_processes_started_total", promtext.Counter, "Background processes started.", float64(ps.Started))
	e.One("sandbox_processes_limit", promtext.Gauge, "The cap on background processes running at once; past it, 503.", float64(ps.MaxRunning))
	e.One("sandbox_process_log_bytes", promtext.Gauge, "Memory held by the retained log lines of every background process, as the log budget counts it.", float64(ps.LogBytes))
	e.One("sandbox_process_log_bytes_limit", promtext.Gauge, "The log budget: the bound on sandbox_process_log_bytes.", float64(ps.LogBudget))

	m := s.metrics
	e.One("sandbox_event_streams_open", promtext.Gauge, "Event streams (/run_streaming, /process_logs_streaming) open now.", float64(m.streamsOpen.Load()))
	e.One("sandbox_event_streams_total", promtext.Counter, "Event streams opened.", float64(m.streamsTotal.Load()))
	e.One("sandbox_event_stream_bytes_total", promtext.Counter, "Bytes sent on event streams.", float64(m.streamBytes.Load()))

	fs := s.fwd.Stats()
	e.One("sandbox_proxy_connections_open", promtext.Gauge, "TCP proxy connections being forwarded now.", float64(fs.Open))
	e.One("sandbox_proxy_connections_total", promtext.Counter, "TCP proxy connections accepted for forwarding.", float64(fs.Total))
	e.One("sandbox_proxy_dial_failures_total", promtext.Counter, "TCP proxy connections whose dial to the bound port failed.", float64(fs.DialFailed))
	const proxyBytes = "sandbox_proxy_bytes_total"
	e.Family(proxyBytes, promtext.Counter, `Bytes forwarded by the TCP proxy: direction "in" from clients to the bound port, "out" back.`)
	e.Sample(proxyBytes, float64(fs.BytesIn), promtext.Label{Name: "direction", Value: "in"})
	e.Sample(proxyBytes, float64(fs.BytesOut), promtext.Label{Name: "direction", Value: "out"})
	bound := 0.0
	if _, ok := s.fwd.Port(); ok {
		bound = 1
	}
	e.One("sandbox_proxy_port_bound", promtext.Gauge, "1 while the TCP proxy has a port bound, else 0.", bound)
}

// writeResources writes the sandbox's resources, as /stats gives them. A
// resource that cannot be read is left out.
func (s *Server) writeResources(e *promtext.Writer) {
	var cpuSource, memSource, diskPath string
	if c, err := s.res.CPU(); err == nil {
		e.One("sandbox_cpu_usage_seconds_total", promtext.Counter, "CPU time used by the sandbox's cgroup (or, without one, the machine), summed over CPUs.", c.UsageSeconds)
		e.One("sandbox_cpu_limit_cores", promtext.Gauge, "CPUs' worth of time the sandbox may use: its cgroup's quota, at most the CPUs the agent may run on.", c.LimitCores)
		cpuSource = c.Source
	}
	if m, err := s.res.Memory(); err == nil {
		e.One("sandbox_memory_used_bytes", promtext.Gauge, "Memory the sandbox's cgroup is charged, page cache included (without a cgroup: the machine's MemTotal less MemAvailable).", float64(m.Used))
		if m.Limit > 0 {
			e.One("sandbox_memory_limit_bytes", promtext.Gauge, "The sandbox's memory limit: its cgroup's, at most the machine's memory.", float64(m.Limit))
		}
		memSource = m.Source
	}
	if d, err := s.res.Disk(); err == nil {
		e.One("sandbox_disk_used_bytes", promtext.Gauge, "Bytes used on the file system of the agent's working directory.", float64(d.Used))
		e.One("sandbox_disk_free_bytes", promtext.Gauge, "Bytes an unprivileged user may still write on the file system of the agent's working directory.", float64(d.Free))
		e.One("sandbox_disk_size_bytes", promtext.Gauge, "Size of the file system of the agent's working directory.", float64(d.Size))
		diskPath = d.Path
	}
	const info = "sandbox_resources_info"
	e.Family(info, promtext.Gauge, "Where the resource metrics come from: cgroup2, cgroup1 or proc (the whole machine); and the directory whose file system the disk metrics describe.")
	e.Sample(info, 1, promtext.Label{Name: "cpu_source", Value: cpuSource},
		promtext.Label{Name: "memory_source", Value: memSource}, promtext.Label{Name: "disk_path", Value: diskPath})
}

// goMetrics are the runtime/metrics samples writeProcess reports.
const (
	goHeapObjects = "/memory/classes/heap/objects:bytes"
	goTotal       = "/memory/classes/total:bytes"
	goGCCycles    = "/gc/cycles/total:gc-cycles"
)

// writeProcess writes the agent process's own resources, under the names
// Prometheus's client libraries give them.
func (s *Server) writeProcess(e *promtext.Writer) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		e.One("process_cpu_seconds_total", promtext.Counter, "Total user and system CPU time spent in seconds.", cpu.Seconds())
	}
	if rss, err := s.res.AgentRSS(); err == nil {
		e.One("process_resident_memory_bytes", promtext.Gauge, "Resident memory size in bytes.", float64(rss))
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.One("process_open_fds", promtext.Gauge, "Number of open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		e.One("process_max_fds", promtext.Gauge, "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	e.One("process_start_time_seconds", promtext.Gauge, "Start time of the process since unix epoch in seconds.", float64(s.started.UnixNano())/1e9)
	e.One("go_goroutines", promtext.Gauge, "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	samples := []rtmetrics.Sample{{Name: goHeapObjects}, {Name: goTotal}, {Name: goGCCycles}}
	rtmetrics.Read(samples)
	for i, f := range []struct{ name, typ, help string }{
		{"go_memstats_heap_alloc_bytes", promtext.Gauge, "Number of heap bytes allocated and currently in use."},
		{"go_memstats_sys_bytes", promtext.Gauge, "Number of bytes obtained from system."},
		{"go_gc_cycles_total", promtext.Counter, "Number of completed garbage collection cycles."},
	} {
		if samples[i].Value.Kind() == rtmetrics.KindUint64 { // KindBad: a runtime without it
			e.One(f.name, f.typ, f.help, float64(samples[i].Value.Uint64()))
		}
	}
}
