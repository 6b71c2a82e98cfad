package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// BenchmarkRunTrue measures a whole /run of `true` over loopback HTTP,
// client included; make bench compares it with a bare spawn.
func BenchmarkRunTrue(b *testing.B) {
	ts, _ := newTestServer(b, testServer{runner: &executor.Runner{}})
	body := []byte(`{"cmd":"true"}`)
	client := ts.Client()
	for b.Loop() {
		req, _ := http.NewRequest("POST", ts.URL+"/run", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkSpawnTrue is BenchmarkRunTrue's reference: the same command
// spawned directly, its output captured.
func BenchmarkSpawnTrue(b *testing.B) {
	for b.Loop() {
		if _, err := exec.Command("/bin/sh", "-c", "true").Output(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHealth is the HTTP round trip alone, for comparison.
func BenchmarkHealth(b *testing.B) {
	ts, _ := newTestServer(b, testServer{runner: &executor.Runner{}})
	client := ts.Client()
	for b.Loop() {
		resp, err := client.Get(ts.URL + "/health")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// discardWriter is an http.ResponseWriter that drops what it is given.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// BenchmarkRunStreamEncode is the server's share of /run_streaming per
// line: batches of 8,000 short lines, as one pipe read of seq gives.
func BenchmarkRunStreamEncode(b *testing.B) {
	st := &runStream{sw: sse.NewWriter(&discardWriter{h: http.Header{}})}
	lines := make([][]byte, 8000)
	for i := range lines {
		lines[i] = []byte(strconv.Itoa(100000 + i))
	}
	now := time.Now()
	for b.Loop() {
		st.addLines(executor.Stdout, now, lines)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
}

// BenchmarkRunStreamingSeq streams seq 1 1000000 to a client that only
// drains, as make bench's "agent alone" figure does.
func BenchmarkRunStreamingSeq(b *testing.B) {
	ts, _ := newTestServer(b, testServer{runner: &executor.Runner{}})
	body := []byte(`{"cmd":"seq 1 1000000"}`)
	for b.Loop() {
		req, _ := http.NewRequest("POST", ts.URL+"/run_streaming", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := ts.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(b.N)*1e6/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkFindFilesHandler is the server's share of a /find_files of
// the .go files of a 12,800-file tree (walk, stat, encoding), as
// sandbox-bench's figure 20 asks for; go test -cpuprofile shows where it
// goes.
func BenchmarkFindFilesHandler(b *testing.B) {
	root := b.TempDir()
	for i := range 12_800 {
		dir := filepath.Join(root, fmt.Sprintf("pkg%03d", i/64))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.go", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	_, s := newTestServer(b, testServer{})
	body, _ := json.Marshal(map[string]any{"path": root, "glob": "**/*.go", "max_results": 20_000})
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/find_files", bytes.NewReader(body))
		if err := s.handleFindFiles(&discardWriter{h: http.Header{}}, r); err != nil {
			b.Fatal(err)
		}
	}
}
