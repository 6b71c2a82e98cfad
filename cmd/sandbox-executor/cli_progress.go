package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

const (
	// progressFrom is the size from which cp shows its progress: a
	// smaller transfer is over before a line would help.
	progressFrom = 4 << 20
	// progressEvery is how often the progress line is redrawn at most.
	progressEvery = 250 * time.Millisecond
)

// progress draws one line on a terminal that says how a transfer goes:
// the bytes moved (of how many, when known), the rate and, when the size
// is known, the time left. It redraws the line in place as bytes move,
// at most every progressEvery, and leaves it, complete, at the end. A
// transfer that stays under progressFrom draws nothing.
//
// A nil *progress draws nothing: what newProgress returns when stderr is
// not a terminal.
type progress struct {
	w     io.Writer
	total int64 // 0 if unknown
	start time.Time
	now   func() time.Time // time.Now; a seam for tests of the line

	// mu guards done and last: the bytes of an upload are counted in the
	// HTTP transport's goroutine, the end in cp's.
	mu   sync.Mutex
	done int64
	last time.Time // when the line was last drawn
}

// newProgress returns the progress of a transfer of total bytes (0 if
// unknown), drawn on c's stderr; nil if stderr is not a terminal (see
// isTerminal, in logging.go).
func (c *cli) newProgress(total int64) *progress {
	if !isTerminal(c.stderr) {
		return nil
	}
	return &progress{w: c.stderr, total: total, start: time.Now(), now: time.Now}
}

// add counts n more bytes moved, and redraws the line if it is time.
func (p *progress) add(n int) {
	if p == nil || n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(n)
	if now := p.now(); p.shownLocked() && now.Sub(p.last) >= progressEvery {
		p.drawLocked(now, false)
	}
}

// finish draws the line a last time, with the time taken, and ends it,
// if the transfer was big enough to show. Call it once the transfer has
// ended, whether or not it succeeded.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shownLocked() {
		p.drawLocked(p.now(), true)
	}
}

// shownLocked reports whether the transfer is big enough to show.
func (p *progress) shownLocked() bool { return max(p.total, p.done) >= progressFrom }

// drawLocked draws the line at now; final ends it with a newline.
func (p *progress) drawLocked(now time.Time, final bool) {
	p.last = now
	elapsed := now.Sub(p.start)
	line := sizeText(p.done)
	if p.total > 0 {
		line += " / " + sizeText(p.total) + fmt.Sprintf(" %3d%%", p.done*100/max(p.total, 1))
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(p.done) / s
	}
	line += "  " + sizeText(int64(rate)) + "/s"
	switch {
	case final:
		line += "  in " + durationText(elapsed)
	case p.total > 0 && rate > 0 && p.done < p.total:
		line += "  ETA " + durationText(time.Duration(float64(p.total-p.done)/rate*float64(time.Second)))
	}
	end := "\x1b[K" // the rest of an older, longer line goes
	if final {
		end += "\n"
	}
	fmt.Fprint(p.w, "\r"+line+end)
}

// sizeText writes n bytes in binary units, such as "12.3 MiB".
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// durationText writes d to the second, such as "42s", "3m05s" or
// "1h02m"; under a second, to the tenth.
func durationText(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// progressReader counts what is read through it in p.
type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(n)
	return n, err
}

// progressWriter counts what is written through it in p.
type progressWriter struct {
	w io.Writer
	p *progress
}

func (w progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.add(n)
	return n, err
}

// reader returns r, counting in p what is read of it; r itself if p is
// nil, so that the client still sees an *os.File's size.
func (p *progress) reader(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return progressReader{r, p}
}

// writer returns w, counting in p what is written to it; w itself if p is
// nil.
func (p *progress) writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return progressWriter{w, p}
}
