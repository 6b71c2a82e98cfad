package server

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
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

// writeRequests writes the request families, their samples in a stable
// order.
func (m *metrics) writeRequests(e *exposition) {
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
	e.family(requests, typeCounter, `API requests served, by route template ("unmatched" for none), method and status code ("aborted" if none was sent).`)
	for _, r := range reqs {
		code := codeAborted
		if r.k.status != 0 {
			code = strconv.Itoa(r.k.status)
		}
		e.sample(requests, float64(r.n), label{"route", r.k.route}, label{"method", r.k.method}, label{"code", code})
	}
	const duration = "sandbox_http_request_duration_seconds"
	e.family(duration, typeHistogram, "Time from a request's arrival to the end of its reply (of the whole stream, for event streams), by route template and method.")
	for _, d := range durs {
		e.histogram(duration, durationBounds[:], d.counts, d.sum, label{"route", d.k.route}, label{"method", d.k.method})
	}
	e.one("sandbox_http_requests_in_flight", typeGauge, "API requests being served now, event streams included.", float64(m.inFlight.Load()))
}

// writeState writes the state of the agent's parts, read now.
func (s *Server) writeState(e *exposition) {
	running, limit := s.runner.Running()
	e.one("sandbox_commands_running", typeGauge, "Commands running now, of every kind: /run, /run_streaming and background processes.", float64(running))
	e.one("sandbox_commands_limit", typeGauge, "The cap on commands running at once; past it, 503.", float64(limit))

	ps := s.procs.Stats()
	e.one("sandbox_processes_running", typeGauge, "Background processes running now.", float64(ps.Running))
	e.one("sandbox_processes_finished", typeGauge, "Finished background processes still listed.", float64(ps.Finished))
	e.one("sandbox_processes_started_total", typeCounter, "Background processes started.", float64(ps.Started))
	e.one("sandbox_processes_limit", typeGauge, "The cap on background processes running at once; past it, 503.", float64(ps.MaxRunning))
	e.one("sandbox_process_log_bytes", typeGauge, "Memory held by the retained log lines of every background process, as the log budget counts it.", float64(ps.LogBytes))
	e.one("sandbox_process_log_bytes_limit", typeGauge, "The log budget: the bound on sandbox_process_log_bytes.", float64(ps.LogBudget))

	m := s.metrics
	e.one("sandbox_event_streams_open", typeGauge, "Event streams (/run_streaming, /process_logs_streaming) open now.", float64(m.streamsOpen.Load()))
	e.one("sandbox_event_streams_total", typeCounter, "Event streams opened.", float64(m.streamsTotal.Load()))
	e.one("sandbox_event_stream_bytes_total", typeCounter, "Bytes sent on event streams.", float64(m.streamBytes.Load()))

	fs := s.fwd.Stats()
	e.one("sandbox_proxy_connections_open", typeGauge, "TCP proxy connections being forwarded now.", float64(fs.Open))
	e.one("sandbox_proxy_connections_total", typeCounter, "TCP proxy connections accepted for forwarding.", float64(fs.Total))
	e.one("sandbox_proxy_dial_failures_total", typeCounter, "TCP proxy connections whose dial to the bound port failed.", float64(fs.DialFailed))
	const proxyBytes = "sandbox_proxy_bytes_total"
	e.family(proxyBytes, typeCounter, `Bytes forwarded by the TCP proxy: direction "in" from clients to the bound port, "out" back.`)
	e.sample(proxyBytes, float64(fs.BytesIn), label{"direction", "in"})
	e.sample(proxyBytes, float64(fs.BytesOut), label{"direction", "out"})
	bound := 0.0
	if _, ok := s.fwd.Port(); ok {
		bound = 1
	}
	e.one("sandbox_proxy_port_bound", typeGauge, "1 while the TCP proxy has a port bound, else 0.", bound)
}
