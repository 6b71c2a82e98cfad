package server

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What exposition writes is what Prometheus's own parser reads back:
// escapes, special values, histograms.
func TestExposition(t *testing.T) {
	var e exposition
	e.family("a_total", typeCounter, "help with \\ a backslash,\na newline and \"quotes\"")
	e.sample("a_total", 1, label{"path", `C:\dir "x"` + "\n2"})
	e.sample("a_total", 2.5e12, label{"path", "plain"})
	e.one("b", typeGauge, "special", math.Inf(1))
	e.one("c", typeGauge, "special", math.NaN())
	e.one("d", typeGauge, "negative", -0.125)
	e.family("h_seconds", typeHistogram, "a histogram")
	e.histogram("h_seconds", []float64{0.5, 1}, []uint64{1, 2, 3}, 7.25, label{"route", "/run"})
	e.histogram("h_seconds", []float64{0.5, 1}, []uint64{0, 0, 0}, 0, label{"route", "/x"})

	parser := expfmt.NewTextParser(model.LegacyValidation)
	f, err := parser.TextToMetricFamilies(bytes.NewReader(e.b))
	require.NoError(t, err, "%s", e.b)

	a := f["a_total"]
	assert.Equal(t, "help with \\ a backslash,\na newline and \"quotes\"", a.GetHelp())
	require.Len(t, a.Metric, 2)
	assert.Equal(t, `C:\dir "x"`+"\n2", a.Metric[0].Label[0].GetValue())
	assert.Equal(t, 1.0, a.Metric[0].Counter.GetValue())
	assert.Equal(t, 2.5e12, a.Metric[1].Counter.GetValue())
	assert.True(t, math.IsInf(f["b"].Metric[0].Gauge.GetValue(), 1))
	assert.True(t, math.IsNaN(f["c"].Metric[0].Gauge.GetValue()))
	assert.Equal(t, -0.125, f["d"].Metric[0].Gauge.GetValue())

	h := f["h_seconds"]
	require.Len(t, h.Metric, 2)
	run := h.Metric[0].Histogram
	assert.Equal(t, uint64(6), run.GetSampleCount())
	assert.Equal(t, 7.25, run.GetSampleSum())
	require.Len(t, run.Bucket, 3)
	assert.Equal(t, uint64(1), run.Bucket[0].GetCumulativeCount())
	assert.Equal(t, 0.5, run.Bucket[0].GetUpperBound())
	assert.Equal(t, uint64(3), run.Bucket[1].GetCumulativeCount())
	assert.True(t, math.IsInf(run.Bucket[2].GetUpperBound(), 1))
	assert.Equal(t, uint64(6), run.Bucket[2].GetCumulativeCount())
}

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
