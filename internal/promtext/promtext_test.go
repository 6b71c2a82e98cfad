package promtext

import (
	"bytes"
	"math"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// What a Writer writes is what Prometheus's own parser reads back:
// escapes, special values, histograms.
func TestWriter(t *testing.T) {
	var e Writer
	e.Family("a_total", Counter, "help with \\ a backslash,\na newline and \"quotes\"")
	e.Sample("a_total", 1, Label{"path", `C:\dir "x"` + "\n2"})
	e.Sample("a_total", 2.5e12, Label{"path", "plain"})
	e.One("b", Gauge, "special", math.Inf(1))
	e.One("c", Gauge, "special", math.NaN())
	e.One("d", Gauge, "negative", -0.125)
	e.Family("h_seconds", Histogram, "a histogram")
	e.Histogram("h_seconds", []float64{0.5, 1}, []uint64{1, 2, 3}, 7.25, Label{"route", "/run"})
	e.Histogram("h_seconds", []float64{0.5, 1}, []uint64{0, 0, 0}, 0, Label{"route", "/x"})

	parser := expfmt.NewTextParser(model.LegacyValidation)
	f, err := parser.TextToMetricFamilies(bytes.NewReader(e.Bytes()))
	require.NoError(t, err, "%s", e.Bytes())

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
