package files

import (
	"bytes"
	"context"
)

// LineWindow is a slice of a file's lines, as read_file's offset and limit
// select them.
type LineWindow struct {
	Data  []byte // the lines selected, line ends kept
	Total int    // lines in the file; a last line without a line end counts
	More  bool   // lines follow the ones selected
}

// Lines returns the lines of c from the 1-based offset on, at most limit
// of them (limit < 0: all the rest). An offset past the end selects
// nothing. It reads the file through c.Copy, keeping only the lines
// selected: at most the file's size, which Scan bounds.
func (c *Content) Lines(ctx context.Context, offset, limit int) (LineWindow, error) {
	lw := &lineWriter{first: max(offset, 1), limit: limit}
	if err := c.Copy(ctx, lw); err != nil {
		return LineWindow{}, err
	}
	total := lw.n
	if lw.partial {
		total++ // a last line without its line end
	}
	last := total // the last line selected
	if limit >= 0 {
		last = min(total, lw.first-1+limit)
	}
	return LineWindow{Data: lw.out, Total: total, More: total > last}, nil
}

// lineWriter keeps the bytes of lines first to first+limit-1 of what is
// written to it, and counts the lines.
type lineWriter struct {
	first, limit int
	n            int  // complete lines seen
	partial      bool // bytes of line n+1 seen, its line end not yet
	out          []byte
}

func (w *lineWriter) selected(line int) bool {
	return line >= w.first && (w.limit < 0 || line < w.first+w.limit)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		line := w.n + 1
		i := bytes.IndexByte(p, '\n')
		end := len(p)
		if i >= 0 {
			end = i + 1
		}
		if w.selected(line) {
			w.out = append(w.out, p[:end]...)
		}
		if i >= 0 {
			w.n++
			w.partial = false
		} else {
			w.partial = true
		}
		p = p[end:]
	}
	return total, nil
}
