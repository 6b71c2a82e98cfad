package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// BenchmarkPreview is a small app's reply through the preview proxy, 16
// clients at once; BenchmarkPreviewDirect is the same app direct.
func BenchmarkPreview(b *testing.B) {
	ts, _ := newTestServer(b, testServer{runner: &executor.Runner{}})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the app\n")
	}))
	defer app.Close()
	benchGets(b, ts.URL+"/proxy/"+strconv.Itoa(portOf(app))+"/")
}

func BenchmarkPreviewDirect(b *testing.B) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the app\n")
	}))
	defer app.Close()
	benchGets(b, app.URL+"/")
}

func benchGets(b *testing.B, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	b.SetParallelism(8)
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+testSecret)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// cpuTime is the CPU time this process has used, in nanoseconds: under a
// busy machine a steadier measure than the time per operation.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
