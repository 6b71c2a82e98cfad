package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A request is counted in the bucket of the least bound at or above its
// duration.
func TestObserveBuckets(t *testing.T) {
	m := newMetrics()
	for _, d := range []float64{0, .001, .0011, 299, 301} {
		m.observe("/r", "GET", 200, secondsToDuration(d))
	}
	h := m.durations[routeKey{"/r", "GET"}]
	got := map[int]uint64{}
	for i := range h.counts {
		if n := h.counts[i].Load(); n > 0 {
			got[i] = n
		}
	}
	assert.Equal(t, map[int]uint64{0: 2, 1: 1, len(durationBounds) - 1: 1, len(durationBounds): 1}, got)
	assert.Equal(t, uint64(5), m.requests[requestKey{"/r", "GET", 200}].Load())
	m.observe("/r", "BREW", 0, 0)
	assert.Equal(t, uint64(1), m.requests[requestKey{"/r", "other", 0}].Load())
}

func secondsToDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
