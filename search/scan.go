package search

import (
	"bytes"
	"io"
	"os"
	"unicode/utf8"
)

// maxText is the longest line a match returns whole, in bytes, its own
// or a line of its context.
const maxText = 240

// MaxLineBytes is the longest line a Match holds whole, in bytes: its
// Text, or a line of its context.
const MaxLineBytes = maxText

// contextCut ends a context line that was cut.
const contextCut = "…"

// textLead is how much of a long line is kept before its match.
const textLead = 60

// checkEvery is how many lines a scan goes between looks at its context.
const checkEvery = 1 << 16

// load reads the file of e whole, unless it is too large, binary or
// cannot be read, which it counts.
func (g *grep) load(e entry) ([]byte, bool) {
	f, size, ok := g.open(e)
	if !ok {
		return nil, false
	}
	defer f.Close()
	if int64(cap(g.buf)) < size+1 {
		g.buf = make([]byte, 0, size+1)
	}
	data, err := readAll(f, g.buf[:0], g.maxBytes)
	g.buf = data[:0]
	switch {
	case err == errTooLarge: // it grew since its stat
		g.reply.Skipped.TooLarge++
	case err != nil:
		g.reply.Skipped.Unreadable++
	case hasNUL(data):
		g.reply.Skipped.Binary++
	default:
		return data, true
	}
	return nil, false
}

// open opens e's file and checks its size, counting what it refuses.
// The caller closes the file.
func (g *grep) open(e entry) (*os.File, int64, bool) {
	f, err := os.OpenFile(e.abs, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		g.reply.Skipped.Unreadable++
		return nil, 0, false
	}
	fi, err := f.Stat()
	switch {
	case err != nil || !fi.Mode().IsRegular():
		g.reply.Skipped.Unreadable++
	case fi.Size() > g.maxBytes:
		g.reply.Skipped.TooLarge++
	default:
		return f, fi.Size(), true
	}
	f.Close()
	return nil, 0, false
}

type tooLarge struct{}

func (tooLarge) Error() string { return "file too large" }

var errTooLarge error = tooLarge{}

// readAll appends what f holds to buf, up to limit bytes.
func readAll(f *os.File, buf []byte, limit int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// scan searches data, the content of e's file, line by line. Lines end
// at "\n"; a "\r" before it is part of the line end, not of the text.
func (g *grep) scan(e entry, data []byte) error {
	if g.pre != nil {
		g.pre.reset()
	}
	line, pos, n := 0, 0, 0
	for pos < len(data) {
		if g.lit != nil || g.pre != nil { // jump to the next line that can match
			at := -1
			if g.lit != nil {
				if i := g.finder.index(data[pos:]); i >= 0 {
					at = pos + i
				}
			} else {
				at = g.pre.index(data, pos)
			}
			if at < 0 {
				return nil
			}
			ls := bytes.LastIndexByte(data[:at], '\n') + 1
			line += bytes.Count(data[pos:ls], []byte{'\n'})
			pos = ls
		}
		end, next := lineEnd(data, pos)
		line++
		if line > e.from {
			text := trimCR(data[pos:end])
			if col := g.find(text); col >= 0 {
				m := makeMatch(e.abs, line, text, col, g.before(data, pos), g.after(data, next))
				if err := g.accept(m, e.rel); err != nil {
					return err
				}
			}
		}
		pos = next
		if n++; n%checkEvery == 0 && g.ctx.Err() != nil {
			return &timedOut{at: e.rel, line: line}
		}
	}
	return nil
}

// lineEnd returns where the line at pos ends (its "\n", or the end of
// data) and where the next one starts.
func lineEnd(data []byte, pos int) (end, next int) {
	i := bytes.IndexByte(data[pos:], '\n')
	if i < 0 {
		return len(data), len(data)
	}
	return pos + i, pos + i + 1
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

// find returns the byte offset of the first match in text, or -1.
func (g *grep) find(text []byte) int {
	if g.lit != nil {
		return g.finder.index(text)
	}
	if loc := g.re.FindIndex(text); loc != nil {
		return loc[0]
	}
	return -1
}

// before returns up to g.context lines before the line starting at pos.
func (g *grep) before(data []byte, pos int) [][]byte {
	var ls [][]byte
	for range g.context {
		if pos == 0 {
			break
		}
		start := bytes.LastIndexByte(data[:pos-1], '\n') + 1
		ls = append(ls, trimCR(data[start:pos-1]))
		pos = start
	}
	for i, j := 0, len(ls)-1; i < j; i, j = i+1, j-1 {
		ls[i], ls[j] = ls[j], ls[i]
	}
	return ls
}

// after returns up to g.context lines from the line starting at pos.
func (g *grep) after(data []byte, pos int) [][]byte {
	var ls [][]byte
	for range g.context {
		if pos >= len(data) {
			break
		}
		end, next := lineEnd(data, pos)
		ls = append(ls, trimCR(data[pos:end]))
		pos = next
	}
	return ls
}

// makeMatch builds the match of line number n, text, whose first match
// is at byte col; both engines build theirs here, so they agree.
func makeMatch(path string, n int, text []byte, col int, before, after [][]byte) Match {
	m := Match{Path: path, Line: n, Column: col + 1}
	var cutBefore, cutAfter bool
	m.Before, cutBefore = contextLines(before)
	m.After, cutAfter = contextLines(after)
	m.ContextTruncated = cutBefore || cutAfter
	if len(text) <= maxText {
		m.Text = string(text)
		return m
	}
	start := max(0, min(col-textLead, len(text)-maxText))
	end := start + maxText
	for start < end && !utf8.RuneStart(text[start]) {
		start++
	}
	for end < len(text) && end > start && !utf8.RuneStart(text[end]) {
		end--
	}
	m.Text, m.TextTruncated = string(text[start:end]), true
	return m
}

// contextLines returns ls as strings, each line over maxText bytes cut
// to its first maxText bytes (at a rune boundary) and ended with
// contextCut; cut reports whether any was. A context line has no match to
// cut around, and a minified file's single line would otherwise come
// whole, once per match, as often as context asks.
func contextLines(ls [][]byte) (out []string, cut bool) {
	if len(ls) == 0 {
		return nil, false
	}
	out = make([]string, len(ls))
	for i, l := range ls {
		if len(l) <= maxText {
			out[i] = string(l)
			continue
		}
		end := maxText
		for end > 0 && !utf8.RuneStart(l[end]) {
			end--
		}
		out[i], cut = string(l[:end])+contextCut, true
	}
	return out, cut
}
