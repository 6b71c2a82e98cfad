package executor

import (
	"os/exec"
	"testing"
)

// BenchmarkRunTrue is the executor's share of a /run of `true`.
func BenchmarkRunTrue(b *testing.B) {
	var r Runner
	for b.Loop() {
		if _, err := r.Run(b.Context(), Command{Cmd: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawnTrue is the reference: os/exec with its output captured.
func BenchmarkSpawnTrue(b *testing.B) {
	for b.Loop() {
		if _, err := exec.Command("/bin/sh", "-c", "true").Output(); err != nil {
			b.Fatal(err)
		}
	}
}
