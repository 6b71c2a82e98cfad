package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The percentiles are nearest-rank: the smallest value with at least p%
// of the values at or below it.
func TestPercentile(t *testing.T) {
	ten := func() []time.Duration {
		var ds []time.Duration
		for i := 10; i >= 1; i-- { // unsorted: percentile sorts
			ds = append(ds, time.Duration(i)*time.Millisecond)
		}
		return ds
	}
	for _, tc := range []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 0, 7},
		{[]time.Duration{7}, 99, 7},
		{ten(), 0, time.Millisecond},
		{ten(), 10, time.Millisecond},
		{ten(), 11, 2 * time.Millisecond},
		{ten(), 50, 5 * time.Millisecond},
		{ten(), 90, 9 * time.Millisecond},
		{ten(), 99, 10 * time.Millisecond},
		{ten(), 100, 10 * time.Millisecond},
		{[]time.Duration{3, 1, 2}, 50, 2},
		{[]time.Duration{4, 1, 3, 2}, 50, 2},
	} {
		assert.Equal(t, tc.want, percentile(tc.ds, tc.p), "p%v of %v", tc.p, tc.ds)
	}
	assert.Equal(t, 5*time.Millisecond, median(ten()))
}

func TestMeanAndMedianFloat(t *testing.T) {
	assert.Equal(t, time.Duration(0), mean(nil))
	assert.Equal(t, 2*time.Second, mean([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second}))
	assert.Equal(t, 0.0, medianFloat(nil))
	assert.Equal(t, 2.0, medianFloat([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, medianFloat([]float64{4, 1, 3, 2}))
}

// A ratio is value over reference; a target on it passes at its bound
// and misses past it; a value or reference that failed to measure (NaN,
// infinite, -1) or a reference of 0 gives no ratio, and a target then
// misses rather than pass on nothing.
func TestRatiosAndTargets(t *testing.T) {
	for _, tc := range []struct {
		name        string
		value, ref  float64
		ratio       float64 // NaN: none
		atMost      float64
		passAtMost  bool
		atLeast     float64
		passAtLeast bool
	}{
		{"half", 50, 100, 0.5, 0.6, true, 0.6, false},
		{"at the bound", 60, 100, 0.6, 0.6, true, 0.6, true},
		{"over", 115.1, 100, 1.151, 1.15, false, 1.15, true},
		{"zero reference", 5, 0, math.NaN(), 10, false, 0, false},
		{"NaN value", math.NaN(), 10, math.NaN(), 1, false, 0, false},
		{"failed value", -1, 10, math.NaN(), 1, false, 0, false},
		{"failed reference", 1, -1, math.NaN(), 10, false, 0, false},
		{"infinite reference", 1, math.Inf(1), math.NaN(), 1, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFigure("s", "n", tc.value, "ms").withRef(tc.ref, "ref")
			require.NotNil(t, f.Reference)
			if math.IsNaN(tc.ratio) {
				assert.Nil(t, f.Ratio)
			} else {
				require.NotNil(t, f.Ratio)
				assert.InDelta(t, tc.ratio, *f.Ratio, 1e-9)
			}
			most := f.ratioAtMost(tc.atMost)
			assert.Equal(t, tc.passAtMost, *most.Pass, "%s", most.Target)
			least := f.ratioAtLeast(tc.atLeast)
			assert.Equal(t, tc.passAtLeast, *least.Pass, "%s", least.Target)
		})
	}
	f := newFigure("s", "n", 1, "ms").withRef(2, "ref")
	assert.Equal(t, "≤ 1.15× ref", f.ratioAtMost(1.15).Target)
	assert.Equal(t, "≥ 0.6× ref", f.ratioAtLeast(0.6).Target)
}

// NaN and infinities are recorded as -1: the JSON file must stay valid.
func TestFiniteValues(t *testing.T) {
	assert.Equal(t, -1.0, newFigure("s", "n", math.NaN(), "ms").Value)
	assert.Equal(t, -1.0, newFigure("s", "n", math.Inf(-1), "ms").Value)
	assert.Equal(t, -1.0, *newFigure("s", "n", 1, "ms").withRef(math.Inf(1), "r").Reference)
	assert.Equal(t, 3.5, newFigure("s", "n", 3.5, "ms").Value)
}

// results counts passed and missed targets; figures without a target
// count as neither, and the table shows each as PASS, MISS or info.
func TestResultsCountsAndTable(t *testing.T) {
	var r report
	r.add(newFigure("a", "pass", 1, "ms").withRef(1, "r").ratioAtMost(1.1))
	r.add(newFigure("a", "miss", 2, "ms").withRef(1, "r").ratioAtMost(1.1))
	r.add(newFigure("b", "info", 3, "ms").withNote("a %s", "note"))
	res := r.results()
	assert.Equal(t, 1, res.Passed)
	assert.Equal(t, 1, res.Missed)
	assert.Len(t, res.Figures, 3)

	var buf bytes.Buffer
	r.printTable(&buf)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 5)
	assert.Regexp(t, `^a pass +1\.000 ms +1\.000 ms +1\.000× +≤ 1\.1× ref +PASS$`, lines[1])
	assert.Regexp(t, `^a miss +2\.000 ms +1\.000 ms +2\.000× +≤ 1\.1× ref +MISS$`, lines[2])
	assert.Regexp(t, `^b info +3\.000 ms +- +- +- +info$`, lines[3])
	assert.Equal(t, "  note: b info: a note", lines[4])
}

func TestFormatValue(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{2_500_000, "lines/s", "2.50M lines/s"},
		{12_345, "calls/s", "12.3k calls/s"},
		{999, "calls/s", "999 calls/s"},
		{42, "bytes", "42 bytes"},
		{1.23456, "ms", "1.235 ms"},
		{12.345, "µs", "12.3 µs"},
		{0.735, "×", "0.73 ×"},
	} {
		assert.Equal(t, tc.want, formatValue(tc.v, tc.unit))
	}
}
