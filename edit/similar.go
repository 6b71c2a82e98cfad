package edit

import (
	"bytes"
	"strings"
)

// maxCompared is the longest line compared when looking for the closest
// one: longer lines are not hints a person or a model can use.
const maxCompared = 1000

// closest returns the line of data most like the first non-blank line of
// old, by the bigrams they share (Dice's coefficient), or nil if data has
// no line at all.
func closest(data []byte, old string) *Line {
	target := ""
	for _, l := range strings.Split(old, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			target = t
			break
		}
	}
	lines := splitLines(data)
	if len(lines) == 0 {
		return nil
	}
	best := bestLine(lines, target)
	return &Line{Line: best + 1, Text: string(lines[best])}
}

// bestLine returns the index of the line of lines most like target.
func bestLine(lines [][]byte, target string) int {
	want := bigrams(target)
	best, bestScore := 0, -1.0
	for i, l := range lines {
		t := bytes.TrimSpace(l)
		if len(t) > maxCompared {
			continue
		}
		if s := dice(want, len(target), string(t)); s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

func bigrams(s string) map[string]int {
	m := map[string]int{}
	for i := 0; i+2 <= len(s); i++ {
		m[s[i:i+2]]++
	}
	return m
}

func dice(want map[string]int, wantLen int, s string) float64 {
	if wantLen < 2 || len(s) < 2 {
		if strings.TrimSpace(s) == "" {
			return 0
		}
		return 0.01 // a non-blank line beats a blank one
	}
	seen := map[string]int{}
	common := 0
	for i := 0; i+2 <= len(s); i++ {
		g := s[i : i+2]
		if seen[g] < want[g] {
			common++
		}
		seen[g]++
	}
	return 2 * float64(common) / float64(wantLen-1+len(s)-1)
}

// splitLines splits data into its lines, without their line ends ("\n",
// and a "\r" before it); a final line end does not start another line.
func splitLines(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	ls := bytes.Split(data, []byte{'\n'})
	if len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	for i, l := range ls {
		ls[i] = bytes.TrimSuffix(l, []byte{'\r'})
	}
	return ls
}
