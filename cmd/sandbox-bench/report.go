package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// figure is one measured figure: a row of the table and an entry of the
// JSON file. Build it with newFigure and the with... methods.
type figure struct {
	Section   string   `json:"section"`
	Name      string   `json:"name"`
	Value     float64  `json:"value"`
	Unit      string   `json:"unit"`
	Reference *float64 `json:"reference,omitempty"` // nil: the figure has no reference
	RefLabel  string   `json:"reference_label,omitempty"`
	Ratio     *float64 `json:"ratio,omitempty"` // Value / Reference
	Target    string   `json:"target,omitempty"`
	Pass      *bool    `json:"pass,omitempty"` // nil: informational, no target
	Note      string   `json:"note,omitempty"`
}

func newFigure(section, name string, value float64, unit string) figure {
	return figure{Section: section, Name: name, Value: finite(value), Unit: unit}
}

// withRef sets the reference measured in the same run and the ratio. A
// figure or reference that failed to measure (not finite, negative, or a
// reference of 0) gives no ratio, so that a target on the ratio misses
// rather than pass on a broken measurement.
func (f figure) withRef(ref float64, label string) figure {
	r := finite(ref)
	f.Reference, f.RefLabel = &r, label
	if measured(f.Value) && measured(ref) && ref > 0 {
		ratio := f.Value / ref
		f.Ratio = &ratio
	}
	return f
}

// measured reports whether v is a figure that was measured: finite() and
// the sections record a failed one as -1.
func measured(v float64) bool {
	return v >= 0 && !math.IsInf(v, 0)
}

// withTarget sets the target's description and whether it was met.
func (f figure) withTarget(target string, pass bool) figure {
	f.Target, f.Pass = target, &pass
	return f
}

func (f figure) withNote(format string, args ...any) figure {
	f.Note = fmt.Sprintf(format, args...)
	return f
}

// ratioAtMost and ratioAtLeast are targets on the ratio to the reference.
func (f figure) ratioAtMost(max float64) figure {
	return f.withTarget(fmt.Sprintf("≤ %.3g× ref", max), f.Ratio != nil && *f.Ratio <= max)
}

func (f figure) ratioAtLeast(min float64) figure {
	return f.withTarget(fmt.Sprintf("≥ %.3g× ref", min), f.Ratio != nil && *f.Ratio >= min)
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return -1
	}
	return v
}

// report collects the figures of one run. Sections add to it from one
// goroutine at a time, but mu keeps it safe regardless; it guards all
// fields.
type report struct {
	mu      sync.Mutex
	figures []figure
	info    map[string]any
}

func (r *report) add(f figure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.figures = append(r.figures, f)
}

// setInfo records a fact that is not a figure, for the JSON file.
func (r *report) setInfo(key string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.info == nil {
		r.info = map[string]any{}
	}
	r.info[key] = v
}

// formatValue prints v in a precision that suits its unit.
func formatValue(v float64, unit string) string {
	switch unit {
	case "lines/s", "calls/s":
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2fM %s", v/1e6, unit)
		case v >= 1e3:
			return fmt.Sprintf("%.1fk %s", v/1e3, unit)
		}
		return fmt.Sprintf("%.0f %s", v, unit)
	case "count", "fds", "errors", "bytes", "readers", "connections":
		return fmt.Sprintf("%.0f %s", v, unit)
	case "ms", "µs":
		if v < 10 {
			return fmt.Sprintf("%.3f %s", v, unit)
		}
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// printTable writes the compact table: figure, value, reference, ratio,
// target and PASS/MISS.
func (r *report) printTable(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\treference\tratio\ttarget\tresult")
	for _, f := range r.figures {
		ref, ratio, result := "-", "-", "info"
		if f.Reference != nil {
			ref = formatValue(*f.Reference, f.Unit)
		}
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.3f×", *f.Ratio)
		}
		if f.Pass != nil {
			result = map[bool]string{true: "PASS", false: "MISS"}[*f.Pass]
		}
		target := f.Target
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\n", f.Section, f.Name,
			formatValue(f.Value, f.Unit), ref, ratio, target, result)
	}
	tw.Flush()
	for _, f := range r.figures {
		if f.Note != "" {
			fmt.Fprintf(w, "  note: %s %s: %s\n", f.Section, f.Name, f.Note)
		}
	}
}

// results is the JSON document written to -out and printed last.
type results struct {
	Started        time.Time      `json:"started"`
	RuntimeSeconds float64        `json:"runtime_seconds"`
	Binary         string         `json:"binary"`
	NumCPU         int            `json:"num_cpu"`
	GoVersion      string         `json:"go_version"`
	Sections       []string       `json:"sections"`
	Passed         int            `json:"passed"`
	Missed         int            `json:"missed"`
	Figures        []figure       `json:"figures"`
	Info           map[string]any `json:"info,omitempty"`
}

func (r *report) results() results {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := results{Figures: slices.Clone(r.figures), Info: r.info}
	for _, f := range r.figures {
		switch {
		case f.Pass == nil:
		case *f.Pass:
			res.Passed++
		default:
			res.Missed++
		}
	}
	return res
}

// writeJSON writes res indented to path, creating its directory, and
// returns the compact form for stdout's last line.
func writeJSON(path string, res results) ([]byte, error) {
	compact, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return compact, nil
	}
	indented, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	return compact, os.WriteFile(path, append(indented, '\n'), 0o644)
}

// percentile returns the p-th percentile (0..100) of ds by the
// nearest-rank method; ds is sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 50) }

// mean returns the mean of ds, 0 if it is empty.
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total / time.Duration(len(ds))
}

// medianFloat returns the median of vs; vs is sorted in place.
func medianFloat(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// errorList keeps the first few distinct error messages of a section and
// counts them all. mu guards both fields; workers add concurrently.
type errorList struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (e *errorList) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.first) < 3 {
		e.first = append(e.first, fmt.Sprintf(format, args...))
	}
}

func (e *errorList) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *errorList) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		return ""
	}
	return fmt.Sprintf("%d errors, first: %s", e.n, strings.Join(e.first, "; "))
}
