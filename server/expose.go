package server

import (
	"math"
	"strconv"
	"strings"
)

// exposition builds a reply in the Prometheus text format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). It is
// written here rather than with client_golang or prometheus/common's
// expfmt: both link the protobuf runtime, which made the agent's binary,
// and so its idle RSS (the kernel maps nearly all of a warm binary), 1.7
// to 2.6 MB bigger. The tests read what it writes with expfmt's parser.
type exposition struct {
	b []byte
}

// label is one name="value" pair of a sample.
type label struct{ name, value string }

// Metric types, as # TYPE lines name them.
const (
	typeCounter   = "counter"
	typeGauge     = "gauge"
	typeHistogram = "histogram"
)

// family starts a metric family: its # HELP and # TYPE lines. Every sample
// of the family must follow before the next family starts.
func (e *exposition) family(name, typ, help string) {
	e.b = append(e.b, "# HELP "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = appendEscaped(e.b, help, false)
	e.b = append(e.b, "\n# TYPE "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, typ...)
	e.b = append(e.b, '\n')
}

// sample writes one sample of the current family.
func (e *exposition) sample(name string, v float64, labels ...label) {
	e.b = append(e.b, name...)
	if len(labels) > 0 {
		e.b = append(e.b, '{')
		for i, l := range labels {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = append(e.b, l.name...)
			e.b = append(e.b, `="`...)
			e.b = appendEscaped(e.b, l.value, true)
			e.b = append(e.b, '"')
		}
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ' ')
	e.b = appendFloat(e.b, v)
	e.b = append(e.b, '\n')
}

// one writes a family of a single sample without labels.
func (e *exposition) one(name, typ, help string, v float64) {
	e.family(name, typ, help)
	e.sample(name, v)
}

// histogram writes the samples of one histogram of the current family:
// cumulative counts per upper bound, +Inf, the sum and the count. counts
// are the counts per bucket, not cumulated; bounds are the buckets' upper
// bounds.
func (e *exposition) histogram(name string, bounds []float64, counts []uint64, sum float64, labels ...label) {
	withLE := append(append(make([]label, 0, len(labels)+1), labels...), label{})
	var cum uint64
	for i, b := range bounds {
		cum += counts[i]
		withLE[len(labels)] = label{"le", string(appendFloat(nil, b))}
		e.sample(name+"_bucket", float64(cum), withLE...)
	}
	for _, c := range counts[len(bounds):] { // the +Inf bucket
		cum += c
	}
	withLE[len(labels)] = label{"le", "+Inf"}
	e.sample(name+"_bucket", float64(cum), withLE...)
	e.sample(name+"_sum", sum, labels...)
	e.sample(name+"_count", float64(cum), labels...)
}

// appendFloat appends v as the format writes numbers: Go's shortest
// representation, and +Inf, -Inf and NaN by name.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendEscaped appends s with backslash and newline escaped, and double
// quotes too in a label value (quoted), as the format requires.
func appendEscaped(b []byte, s string, quoted bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quoted:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
