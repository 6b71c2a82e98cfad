package edit

import (
	"bytes"
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines surround each change.
const diffContext = 3

// maxDiffEdits bounds the search for the shortest edit script between
// the parts of two files that differ: past it, that part is shown as
// removed whole and added whole, which is still a correct diff.
const maxDiffEdits = 500

// op is one line of an edit script: ' ' (kept), '-' or '+'; a and b are
// how many lines of each side come before it.
type op struct {
	kind byte
	line []byte
	a, b int
}

// maxDiffBytes caps a diff: a reply carries it whole, in memory.
const maxDiffBytes = 1 << 20

// diffCut ends a diff cut at maxDiffBytes.
const diffCut = "\\ diff cut: over 1 MiB\n"

// unifiedDiff returns a unified diff from a, named aName, to b, named
// bName ("/dev/null" for a file added or removed); "" if a and b are the
// same. A diff over maxDiffBytes is cut at a line and ends with diffCut.
func unifiedDiff(aName, bName string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	al, bl := splitKeep(a), splitKeep(b)
	pre := 0
	for pre < len(al) && pre < len(bl) && bytes.Equal(al[pre], bl[pre]) {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && bytes.Equal(al[len(al)-1-suf], bl[len(bl)-1-suf]) {
		suf++
	}
	var script []op
	for i := max(0, pre-diffContext); i < pre; i++ {
		script = append(script, op{' ', al[i], i, i})
	}
	script = append(script, middle(al[pre:len(al)-suf], bl[pre:len(bl)-suf], pre)...)
	for i := 0; i < min(suf, diffContext); i++ {
		ai, bi := len(al)-suf+i, len(bl)-suf+i
		script = append(script, op{' ', al[ai], ai, bi})
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
	writeHunks(&sb, script)
	return sb.String()
}

// middle is the edit script from a to b, both starting at line off.
func middle(a, b [][]byte, off int) []op {
	ops, ok := myers(a, b)
	if !ok {
		ops = ops[:0]
		for i, l := range a {
			ops = append(ops, op{'-', l, i, 0})
		}
		for i, l := range b {
			ops = append(ops, op{'+', l, len(a), i})
		}
	}
	for i := range ops {
		ops[i].a += off
		ops[i].b += off
	}
	return ops
}

// myers returns the shortest edit script from a to b (Myers' O(ND)
// algorithm), or false if it has more than maxDiffEdits edits.
func myers(a, b [][]byte) ([]op, bool) {
	n, m := len(a), len(b)
	limit := min(maxDiffEdits, n+m)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	for d := 0; d <= limit; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && bytes.Equal(a[x], b[y]) {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, off), true
			}
		}
	}
	return nil, false
}

// backtrack walks the trace of myers back from the end of a and b.
func backtrack(trace [][]int, a, b [][]byte, off int) []op {
	x, y := len(a), len(b)
	var rev []op
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[off+pk]
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			rev = append(rev, op{' ', a[x], x, y})
		}
		if d == 0 {
			break
		}
		if x == px {
			rev = append(rev, op{'+', b[y-1], x, y - 1})
		} else {
			rev = append(rev, op{'-', a[x-1], x - 1, y})
		}
		x, y = px, py
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// writeHunks writes script's changes with diffContext lines around
// them; changes closer than twice that share a hunk.
func writeHunks(sb *strings.Builder, script []op) {
	for i := 0; i < len(script); {
		for i < len(script) && script[i].kind == ' ' {
			i++
		}
		if i == len(script) {
			return
		}
		start := max(0, i-diffContext)
		last := i
		for j := i; j < len(script) && j-last <= 2*diffContext; j++ {
			if script[j].kind != ' ' {
				last = j
			}
		}
		end := min(len(script), last+1+diffContext)
		if !writeHunk(sb, script[start:end]) {
			return
		}
		i = end
	}
}

func writeHunk(sb *strings.Builder, h []op) bool {
	var na, nb int
	for _, o := range h {
		if o.kind != '+' {
			na++
		}
		if o.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(h[0].a, na), hunkRange(h[0].b, nb))
	for _, o := range h {
		if sb.Len()+len(o.line) > maxDiffBytes {
			sb.WriteString(diffCut)
			return false
		}
		sb.WriteByte(o.kind)
		sb.Write(o.line)
		if !bytes.HasSuffix(o.line, []byte{'\n'}) {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
	return true
}

// hunkRange is a hunk's "start,count": a 1-based start, or for an empty
// range the line it follows.
func hunkRange(before, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", before)
	}
	if n == 1 {
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}

// splitKeep splits data into lines that keep their line ends.
func splitKeep(data []byte) [][]byte {
	var ls [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n') + 1
		if i == 0 {
			i = len(data)
		}
		ls = append(ls, data[:i])
		data = data[i:]
	}
	return ls
}
