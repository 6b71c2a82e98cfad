package server

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// routeUnmatched is the route label of a request that matched no route: an
// unknown path, or a known one with another method. Labels stay bounded
// whatever paths clients send.
const routeUnmatched = "unmatched"

// codeAborted is the code label of a request whose handler gave up with a
// panic (http.ErrAbortHandler) before sending a status.
const codeAborted = "aborted"

// metrics holds what /metrics reports, on a registry of the Server's own.
// Per request, the access middleware adds to the request counters and
// histogram; the counts of event streams are atomics; everything else is
// read when /metrics is scraped (see stateCollector and
// resourceCollector), so nothing on a hot path takes a lock for metrics.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec   // by route, method and code
	duration *prometheus.HistogramVec // by route and method
	inFlight prometheus.Gauge

	streamsOpen  atomic.Int64  // event streams open now
	streamsTotal atomic.Uint64 // event streams opened
	streamBytes  atomic.Uint64 // bytes written to event streams
}

// newMetrics returns the metrics of s, which must have its dependencies
// set: the collectors read them at every scrape.
func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_http_requests_total",
			Help: "API requests served, by route template (\"unmatched\" for none), method and status code (\"aborted\" if none was sent).",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_http_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its reply (of the whole stream, for event streams), by route template and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_http_requests_in_flight",
			Help: "API requests being served now, event streams included.",
		}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.inFlight,
		newStateCollector(s), newResourceCollector(s.res),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe records a served request.
func (m *metrics) observe(route, method string, status int, seconds float64) {
	method = methodLabel(method)
	code := codeAborted
	if status != 0 {
		code = strconv.Itoa(status)
	}
	m.requests.WithLabelValues(route, method, code).Inc()
	m.duration.WithLabelValues(route, method).Observe(seconds)
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

// stateCollector reports the state of the agent's parts, read at scrape
// time.
type stateCollector struct {
	s *Server

	commandsRunning, commandsLimit                                 *prometheus.Desc
	procsRunning, procsFinished, procsStarted, procsLimit          *prometheus.Desc
	logBytes, logBudget                                            *prometheus.Desc
	streamsOpen, streamsTotal, streamBytes                         *prometheus.Desc
	proxyOpen, proxyTotal, proxyDialFailed, proxyBytes, proxyBound *prometheus.Desc
}

func newStateCollector(s *Server) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{
		s:               s,
		commandsRunning: d("sandbox_commands_running", "Commands running now, of every kind: /run, /run_streaming and background processes."),
		commandsLimit:   d("sandbox_commands_limit", "The cap on commands running at once; past it, 503."),
		procsRunning:    d("sandbox_processes_running", "Background processes running now."),
		procsFinished:   d("sandbox_processes_finished", "Finished background processes still listed."),
		procsStarted:    d("sandbox_processes_started_total", "Background processes started."),
		procsLimit:      d("sandbox_processes_limit", "The cap on background processes running at once; past it, 503."),
		logBytes:        d("sandbox_process_log_bytes", "Memory held by the retained log lines of every background process, as the log budget counts it."),
		logBudget:       d("sandbox_process_log_bytes_limit", "The log budget: the bound on sandbox_process_log_bytes."),
		streamsOpen:     d("sandbox_event_streams_open", "Event streams (/run_streaming, /process_logs_streaming) open now."),
		streamsTotal:    d("sandbox_event_streams_total", "Event streams opened."),
		streamBytes:     d("sandbox_event_stream_bytes_total", "Bytes sent on event streams."),
		proxyOpen:       d("sandbox_proxy_connections_open", "TCP proxy connections being forwarded now."),
		proxyTotal:      d("sandbox_proxy_connections_total", "TCP proxy connections accepted for forwarding."),
		proxyDialFailed: d("sandbox_proxy_dial_failures_total", "TCP proxy connections whose dial to the bound port failed."),
		proxyBytes:      d("sandbox_proxy_bytes_total", "Bytes forwarded by the TCP proxy: direction \"in\" from clients to the bound port, \"out\" back.", "direction"),
		proxyBound:      d("sandbox_proxy_port_bound", "1 while the TCP proxy has a port bound, else 0."),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.commandsRunning, c.commandsLimit, c.procsRunning, c.procsFinished,
		c.procsStarted, c.procsLimit, c.logBytes, c.logBudget, c.streamsOpen, c.streamsTotal, c.streamBytes,
		c.proxyOpen, c.proxyTotal, c.proxyDialFailed, c.proxyBytes, c.proxyBound} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	running, limit := c.s.runner.Running()
	gauge(c.commandsRunning, float64(running))
	gauge(c.commandsLimit, float64(limit))

	ps := c.s.procs.Stats()
	gauge(c.procsRunning, float64(ps.Running))
	gauge(c.procsFinished, float64(ps.Finished))
	counter(c.procsStarted, float64(ps.Started))
	gauge(c.procsLimit, float64(ps.MaxRunning))
	gauge(c.logBytes, float64(ps.LogBytes))
	gauge(c.logBudget, float64(ps.LogBudget))

	m := c.s.metrics
	gauge(c.streamsOpen, float64(m.streamsOpen.Load()))
	counter(c.streamsTotal, float64(m.streamsTotal.Load()))
	counter(c.streamBytes, float64(m.streamBytes.Load()))

	fs := c.s.fwd.Stats()
	gauge(c.proxyOpen, float64(fs.Open))
	counter(c.proxyTotal, float64(fs.Total))
	counter(c.proxyDialFailed, float64(fs.DialFailed))
	counter(c.proxyBytes, float64(fs.BytesIn), "in")
	counter(c.proxyBytes, float64(fs.BytesOut), "out")
	bound := 0.0
	if _, ok := c.s.fwd.Port(); ok {
		bound = 1
	}
	gauge(c.proxyBound, bound)
}
