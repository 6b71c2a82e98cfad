package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// scrape gets /metrics with the token and parses it.
func scrape(t *testing.T, ts *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp := request(t, ts, http.MethodGet, "/metrics", nil)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4"), resp.Header.Get("Content-Type"))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// value returns the value of the sample of family name whose labels
// include labels (name=value pairs), and whether there is one.
func value(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// After a /run, an event stream, background processes and a proxied
// connection, /metrics, read by Prometheus's own text parser, has every
// family with values that account for them.
func TestMetrics(t *testing.T) {
	ts, s := newTestServer(t, testServer{})

	resp := request(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "echo hi"})
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp = request(t, ts, http.MethodPost, "/run_streaming", map[string]any{"cmd": "seq 1 3"})
	streamed, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(streamed), "event: complete")

	resp = request(t, ts, http.MethodPost, "/start_process", map[string]any{"cmd": "sleep 100"})
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp = request(t, ts, http.MethodPost, "/start_process", map[string]any{"cmd": "echo done"})
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	// One proxied connection: 5 bytes in, 5 echoed out.
	echo := testutil.Serve(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	resp = request(t, ts, http.MethodPost, "/bind_port", map[string]any{"port": strconv.Itoa(echo.Addr().(*net.TCPAddr).Port)})
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c, err := net.DialTimeout("tcp", proxyAddr(s), 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "hello")
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 5))
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	_, _ = io.Copy(io.Discard, c)
	c.Close()

	// A 404, and a 401 for a route that exists.
	resp = request(t, ts, http.MethodGet, "/no/such/endpoint/12345", nil)
	drain(t, resp)
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/run", strings.NewReader(`{"cmd":"true"}`))
	require.NoError(t, err)
	resp, err = ts.Client().Do(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	var f map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		f = scrape(t, ts)
		open, _ := value(f, "sandbox_proxy_connections_open")
		streams, _ := value(f, "sandbox_event_streams_open")
		finished, _ := value(f, "sandbox_processes_finished")
		return open == 0 && streams == 0 && finished == 1
	}, 5*time.Second, 20*time.Millisecond, "the stream, the proxied connection and echo done are over")

	want := []struct {
		name   string
		labels []string
		check  func(float64) bool
	}{
		{"sandbox_http_requests_total", []string{"route", "/run", "method", "POST", "code", "200"}, eq(1)},
		{"sandbox_http_requests_total", []string{"route", "/run", "method", "POST", "code", "401"}, eq(1)},
		{"sandbox_http_requests_total", []string{"route", "/run_streaming", "code", "200"}, eq(1)},
		{"sandbox_http_requests_total", []string{"route", "/start_process", "code", "201"}, eq(2)},
		{"sandbox_http_requests_total", []string{"route", routeUnmatched, "method", "GET", "code", "404"}, eq(1)},
		{"sandbox_http_request_duration_seconds", []string{"route", "/run", "method", "POST"}, eq(2)},
		{"sandbox_http_requests_in_flight", nil, eq(1)}, // this scrape
		{"sandbox_commands_running", nil, eq(1)},        // the sleep
		{"sandbox_commands_limit", nil, positive},
		{"sandbox_processes_running", nil, eq(1)},
		{"sandbox_processes_finished", nil, eq(1)},
		{"sandbox_processes_started_total", nil, eq(2)},
		{"sandbox_processes_limit", nil, positive},
		{"sandbox_process_log_bytes", nil, positive},
		{"sandbox_process_log_bytes_limit", nil, eq(128 << 20)},
		{"sandbox_event_streams_open", nil, eq(0)},
		{"sandbox_event_streams_total", nil, eq(1)},
		{"sandbox_event_stream_bytes_total", nil, eq(float64(len(streamed)))},
		{"sandbox_proxy_connections_open", nil, eq(0)},
		{"sandbox_proxy_connections_total", nil, eq(1)},
		{"sandbox_proxy_dial_failures_total", nil, eq(0)},
		{"sandbox_proxy_bytes_total", []string{"direction", "in"}, eq(5)},
		{"sandbox_proxy_bytes_total", []string{"direction", "out"}, eq(5)},
		{"sandbox_proxy_port_bound", nil, eq(1)},
		{"sandbox_cpu_usage_seconds_total", nil, positive},
		{"sandbox_cpu_limit_cores", nil, positive},
		{"sandbox_memory_used_bytes", nil, positive},
		{"sandbox_memory_limit_bytes", nil, positive},
		{"sandbox_disk_used_bytes", nil, positive},
		{"sandbox_disk_free_bytes", nil, positive},
		{"sandbox_disk_size_bytes", nil, positive},
		{"sandbox_resources_info", nil, eq(1)},
		{"process_resident_memory_bytes", nil, positive},
		{"go_goroutines", nil, positive},
	}
	for _, w := range want {
		v, ok := value(f, w.name, w.labels...)
		if assert.True(t, ok, "%s%v missing", w.name, w.labels) {
			assert.True(t, w.check(v), "%s%v = %v", w.name, w.labels, v)
		}
	}
	used, _ := value(f, "sandbox_memory_used_bytes")
	limit, _ := value(f, "sandbox_memory_limit_bytes")
	assert.LessOrEqual(t, used, limit)
	_, ok := value(f, "sandbox_http_requests_total", "route", "/no/such/endpoint/12345")
	assert.False(t, ok, "a path is never a label")
	assert.NotNil(t, s.metrics)
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func positive(v float64) bool            { return v > 0 }

func drain(t *testing.T, resp *http.Response) {
	t.Helper()
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// Routes that take path variables are labelled by their template, so the
// routes other files add are bounded without doing anything.
func TestMetricsRouteTemplate(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	// Registered after New, as another resource's routes would be; not in
	// the document, so reached without the checker.
	s.router.Handle("/things/{id}", s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusTeapot, "no")
	})).Methods(http.MethodGet)
	for _, id := range []string{"a", "b", "c"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/things/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusTeapot, rec.Code)
	}
	v, ok := value(scrape(t, ts), "sandbox_http_requests_total", "route", "/things/{id}", "code", "418")
	assert.True(t, ok)
	assert.Equal(t, 3.0, v)
}

// /metrics needs the token unless MetricsOpen; /stats always does.
func TestMetricsOpen(t *testing.T) {
	for _, open := range []bool{false, true} {
		ts, _ := newTestServer(t, testServer{cfg: Config{MetricsOpen: open}})
		for path, wantOpen := range map[string]bool{"/metrics": open, "/stats": false} {
			resp, err := ts.Client().Get(ts.URL + path)
			require.NoError(t, err)
			drain(t, resp)
			want := http.StatusUnauthorized
			if wantOpen {
				want = http.StatusOK
			}
			assert.Equal(t, want, resp.StatusCode, "%s with MetricsOpen %v", path, open)
		}
	}
}

// /stats is one JSON object that the document describes (the checker
// validates it) with sane values.
func TestStats(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	resp := request(t, ts, http.MethodGet, "/stats", nil)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var st struct {
		Time time.Time
		CPU  struct {
			UsageSeconds float64 `json:"usage_seconds"`
			LimitCores   float64 `json:"limit_cores"`
			Source       string
		}
		Memory struct {
			UsedBytes  uint64 `json:"used_bytes"`
			LimitBytes uint64 `json:"limit_bytes"`
		}
		Disk struct {
			Path      string
			UsedBytes uint64 `json:"used_bytes"`
			FreeBytes uint64 `json:"free_bytes"`
			SizeBytes uint64 `json:"size_bytes"`
		}
		Agent struct {
			RSSBytes   uint64 `json:"rss_bytes"`
			Goroutines int
		}
	}
	require.NoError(t, json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&st))
	assert.WithinDuration(t, time.Now(), st.Time, time.Minute)
	assert.Positive(t, st.CPU.UsageSeconds)
	assert.Positive(t, st.CPU.LimitCores)
	assert.NotEmpty(t, st.CPU.Source)
	assert.Positive(t, st.Memory.UsedBytes)
	assert.GreaterOrEqual(t, st.Memory.LimitBytes, st.Memory.UsedBytes)
	assert.NotEmpty(t, st.Disk.Path)
	assert.Positive(t, st.Disk.SizeBytes)
	assert.LessOrEqual(t, st.Disk.UsedBytes+st.Disk.FreeBytes, st.Disk.SizeBytes)
	assert.Greater(t, st.Agent.RSSBytes, uint64(1<<20))
	assert.Positive(t, st.Agent.Goroutines)
}

// Requests counted while /metrics is scraped are all counted, once.
func TestMetricsConcurrent(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	const clients, each = 4, 50
	done := make(chan struct{})
	for range clients {
		go func() { // ends after its requests
			defer func() { done <- struct{}{} }()
			for range each {
				resp, err := ts.Client().Get(ts.URL + "/health")
				if err == nil {
					drain(t, resp)
				}
			}
		}()
	}
	for range 10 {
		scrape(t, ts)
	}
	for range clients {
		<-done
	}
	v, ok := value(scrape(t, ts), "sandbox_http_requests_total", "route", "/health", "code", "200")
	assert.True(t, ok)
	assert.Equal(t, float64(clients*each), v)
}
