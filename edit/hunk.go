package edit

import (
	"strings"
	"unicode"
)

// replacement replaces n lines at line `at` with lines.
type replacement struct {
	at, n int
	lines []string
}

// applyHunks applies hunks to data, the content of the file at path.
func applyHunks(path string, data []byte, hunks []hunk) ([]byte, error) {
	if len(hunks) == 0 { // a move alone: the content moves as it is
		return data, nil
	}
	crlf := isCRLF(data)
	var lines []string
	for _, l := range splitLines(data) {
		lines = append(lines, string(l))
	}
	var reps []replacement
	pos := 0
	for i, h := range hunks {
		if h.context != "" {
			j := seek(lines, []string{h.context}, pos, false)
			if j < 0 {
				return nil, &HunkError{File: path, Hunk: i + 1, Nearest: nearest(lines, h.context), Reason: "its @@ line is not in the file"}
			}
			pos = j + 1
		}
		old, hl := h.old(), h.lines
		if len(old) == 0 { // only additions: after the @@ line, or at the end
			at := len(lines)
			if h.context != "" {
				at = pos
			}
			reps = append(reps, replacement{at, 0, added(hl)})
			continue
		}
		j := seek(lines, old, pos, h.eof)
		if last := hl[len(hl)-1]; j < 0 && last.kind != '+' && last.text == "" {
			// a blank line the model added at the end of the hunk
			old, hl = old[:len(old)-1], hl[:len(hl)-1]
			j = seek(lines, old, pos, h.eof)
		}
		if j < 0 {
			return nil, &HunkError{File: path, Hunk: i + 1, Nearest: nearest(lines, firstText(old)), Reason: "its lines are not in the file"}
		}
		reps = append(reps, replacement{j, len(old), replaced(hl, lines[j:j+len(old)])})
		pos = j + len(old)
	}
	for i := len(reps) - 1; i >= 0; i-- {
		r := reps[i]
		lines = append(lines[:r.at], append(append([]string(nil), r.lines...), lines[r.at+r.n:]...)...)
	}
	return joinLines(lines, crlf), nil
}

// joinLines joins lines, each ended by "\n" or "\r\n".
func joinLines(lines []string, crlf bool) []byte {
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var sb strings.Builder
	for _, l := range lines {
		sb.WriteString(l)
		sb.WriteString(eol)
	}
	return []byte(sb.String())
}

// seek returns the first line, from start on, where pat's lines are, or
// -1. As Codex's apply_patch does, it tries each way of comparing lines
// over the whole file before the next, looser one: exactly, then
// ignoring trailing whitespace, then ignoring leading and trailing
// whitespace, then also reading typographic punctuation as ASCII. A hunk
// at the end of the file (eof) is first tried there.
func seek(lines, pat []string, start int, eof bool) int {
	if len(pat) > len(lines) {
		return -1
	}
	for _, same := range [...]func(a, b string) bool{exact, rstripped, trimmed, normalized} {
		if end := len(lines) - len(pat); eof && end >= start && matchAt(lines, pat, end, same) {
			return end
		}
		for i := start; i+len(pat) <= len(lines); i++ {
			if matchAt(lines, pat, i, same) {
				return i
			}
		}
	}
	return -1
}

func matchAt(lines, pat []string, at int, same func(a, b string) bool) bool {
	for k, p := range pat {
		if !same(lines[at+k], p) {
			return false
		}
	}
	return true
}

func exact(a, b string) bool { return a == b }

func rstripped(a, b string) bool {
	return strings.TrimRightFunc(a, unicode.IsSpace) == strings.TrimRightFunc(b, unicode.IsSpace)
}

func trimmed(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }

func normalized(a, b string) bool {
	return asciiPunct(strings.TrimSpace(a)) == asciiPunct(strings.TrimSpace(b))
}

// asciiPunct reads typographic dashes, quotes and spaces as ASCII ones.
func asciiPunct(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212':
			return '-'
		case '\u2018', '\u2019', '\u201A', '\u201B':
			return '\''
		case '\u201C', '\u201D', '\u201E', '\u201F':
			return '"'
		case '\u00A0', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200A', '\u202F', '\u205F', '\u3000':
			return ' '
		}
		return r
	}, s)
}

func firstText(ls []string) string {
	for _, l := range ls {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return ""
}

// nearest returns up to three lines of the file from the one most like
// target.
func nearest(lines []string, target string) []Line {
	if len(lines) == 0 {
		return []Line{}
	}
	bs := make([][]byte, len(lines))
	for i, l := range lines {
		bs[i] = []byte(l)
	}
	best := bestLine(bs, strings.TrimSpace(target))
	var out []Line
	for i := best; i < min(best+3, len(lines)); i++ {
		out = append(out, Line{Line: i + 1, Text: lines[i]})
	}
	return out
}

// added returns the lines a hunk of additions only adds.
func added(hl []hunkLine) []string {
	var ls []string
	for _, l := range hl {
		ls = append(ls, l.text)
	}
	return ls
}

// replaced returns what the file's lines matched by a hunk become: its
// kept lines as the file has them, its added lines as the hunk has them.
func replaced(hl []hunkLine, matched []string) []string {
	var ls []string
	k := 0
	for _, l := range hl {
		switch l.kind {
		case ' ':
			ls = append(ls, matched[k])
			k++
		case '-':
			k++
		case '+':
			ls = append(ls, l.text)
		}
	}
	return ls
}
