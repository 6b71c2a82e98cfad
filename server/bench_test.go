package server

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"testing"
)

// BenchmarkRunTrue measures a whole /run of `true` over loopback HTTP,
// client included; make bench compares it with a bare spawn.
func BenchmarkRunTrue(b *testing.B) {
	ts, _ := newTestServerForBench(b)
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
	ts, _ := newTestServerForBench(b)
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
