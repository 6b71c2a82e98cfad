package search

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
)

// The rg engine: the walk, its accounting and the checks of each file
// (size, binary) are the Go engine's own, so that both engines count the
// same things the same way; rg only searches the files the walk found
// to be text, in batches, in walk order (-j1 keeps the order of the
// paths given), with -a (the file is text: a NUL after the first 8 KiB
// is searched as text, as the Go engine does) and --crlf (a "\r" before
// "\n" is part of the line end, as in the Go engine). Its JSON gives each
// matching line and its context lines; the matches are built by the same
// makeMatch. rg's flags and ignore files never decide what is searched.

// Batch bounds: how many files, and how many bytes of them, rg gets at once.
const (
	rgBatchFiles = 512
	rgBatchBytes = 64 << 20
)

// rgRunner is the rg engine of one grep: it holds the walk's entries
// until a batch is full, then has rg search the text files among them and
// takes the entries in order, counting each as the Go engine would.
type rgRunner struct {
	path    string
	pattern string
	g       *grep
	batch   []rgItem
	next    int // the first entry of batch not yet taken
	files   int // text files in batch
	bytes   int64
	head    []byte // the first bytes of a file, reused
}

// rgItem is one entry of the walk, classified.
type rgItem struct {
	e    entry
	skip *int // the counter of a file not searched; nil for a text file
}

// add classifies e and queues it, searching the batch once it is full.
func (r *rgRunner) add(e entry) error {
	it := rgItem{e: e}
	sk := &r.g.reply.Skipped
	switch e.kind {
	case entExcluded:
		it.skip = &sk.Excluded
	case entUnreadable:
		it.skip = &sk.Unreadable
	case entFile:
		it.skip = r.classify(e)
	default:
		return nil
	}
	r.batch = append(r.batch, it)
	if r.files >= rgBatchFiles || r.bytes >= rgBatchBytes {
		return r.flush()
	}
	return nil
}

// classify returns the counter of e's file if it is not to be searched.
func (r *rgRunner) classify(e entry) *int {
	sk := &r.g.reply.Skipped
	f, err := os.OpenFile(e.abs, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return &sk.Unreadable
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil || !fi.Mode().IsRegular():
		return &sk.Unreadable
	case fi.Size() > r.g.maxBytes:
		return &sk.TooLarge
	}
	if r.head == nil {
		r.head = make([]byte, binaryPrefix)
	}
	head := r.head
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return &sk.Unreadable
	}
	if hasNUL(head[:n]) {
		return &sk.Binary
	}
	r.files++
	r.bytes += fi.Size()
	return nil
}

// take takes the entries before batch[upTo]: a text file among them had
// no match.
func (r *rgRunner) take(upTo int) {
	for ; r.next < upTo; r.next++ {
		if s := r.batch[r.next].skip; s != nil {
			*s++
		} else {
			r.g.reply.FilesScanned++
		}
	}
}

// pending returns where the first entry not yet taken is.
func (r *rgRunner) pending() ([]string, int, bool) {
	if r.next >= len(r.batch) {
		return nil, 0, false
	}
	e := r.batch[r.next].e
	return e.rel, max(e.from, 0), true
}

// flush has rg search the batch's text files and takes the batch.
func (r *rgRunner) flush() error {
	defer func() { r.batch, r.next, r.files, r.bytes = r.batch[:0], 0, 0, 0 }()
	if r.files == 0 {
		r.take(len(r.batch))
		return nil
	}
	if err := r.search(); err != nil {
		return err
	}
	r.take(len(r.batch))
	return nil
}

func (r *rgRunner) args() []string {
	a := []string{"--json", "--no-config", "-j1", "-a", "--crlf", "--no-ignore", "--hidden", "--no-messages"}
	if r.g.context > 0 {
		a = append(a, "-C", strconv.Itoa(r.g.context))
	}
	if r.g.lit != nil || r.g.reFixed {
		a = append(a, "-F")
		if r.g.reFixed {
			a = append(a, "-i")
		}
	}
	a = append(a, "-e", r.pattern, "--")
	for _, it := range r.batch {
		if it.skip == nil {
			a = append(a, it.e.abs)
		}
	}
	return a
}

// search runs rg on the batch and takes its entries up to the last one
// rg reported on, emitting the matches.
func (r *rgRunner) search() error {
	ctx, cancel := context.WithCancel(r.g.ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.path, r.args()...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stderr := &capped{max: 4 << 10} // for the error message only
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		if r.g.ctx.Err() != nil {
			return r.timedOut()
		}
		return err
	}
	perr := r.parse(bufio.NewReaderSize(out, 1<<16))
	if perr != nil {
		cancel() // the grep stopped: rg's other matches are not needed
		_ = cmd.Wait()
		return perr
	}
	werr := cmd.Wait()
	switch {
	case r.g.ctx.Err() != nil:
		return r.timedOut()
	case werr != nil && cmd.ProcessState.ExitCode() != 1: // 1: no match
		return fmt.Errorf("rg: %v: %s", werr, bytes.TrimSpace(stderr.b))
	}
	return nil
}

func (r *rgRunner) timedOut() error {
	at, line, ok := r.pending()
	if !ok {
		e := r.batch[len(r.batch)-1].e
		at, line = e.rel, max(e.from, 0)
	}
	return &timedOut{at: at, line: line}
}

// rgMessage is the part of a line of rg's JSON output used here.
type rgMessage struct {
	Type string `json:"type"`
	Data struct {
		Path       rgData `json:"path"`
		Lines      rgData `json:"lines"`
		LineNumber int    `json:"line_number"`
		Submatches []struct {
			Start int `json:"start"`
		} `json:"submatches"`
	} `json:"data"`
}

// rgData is rg's form of bytes: text if they are UTF-8, base64 if not.
type rgData struct {
	Text  *string `json:"text"`
	Bytes *string `json:"bytes"`
}

func (d rgData) bytes() []byte {
	if d.Text != nil {
		return []byte(*d.Text)
	}
	if d.Bytes != nil {
		b, _ := base64.StdEncoding.DecodeString(*d.Bytes)
		return b
	}
	return nil
}

// rgFile is the file rg is reporting on: its lines seen so far.
type rgFile struct {
	item    int
	lines   map[int][]byte
	matches []rgHit
}

type rgHit struct{ line, col int }

// parse reads rg's output to its end, or until the grep stops.
func (r *rgRunner) parse(br *bufio.Reader) error {
	var cur *rgFile
	for {
		raw, err := br.ReadBytes('\n')
		if err == nil { // a line cut short is rg's, killed at the timeout
			var m rgMessage
			if jerr := json.Unmarshal(raw, &m); jerr != nil {
				return fmt.Errorf("rg output: %w", jerr)
			}
			if cur, err = r.message(&m, cur); err != nil {
				return err
			}
		}
		if err != nil {
			return nil // EOF, or rg killed: search tells which
		}
	}
}

func (r *rgRunner) message(m *rgMessage, cur *rgFile) (*rgFile, error) {
	switch m.Type {
	case "begin":
		p := string(m.Data.Path.bytes())
		j := r.next
		for j < len(r.batch) && (r.batch[j].skip != nil || r.batch[j].e.abs != p) {
			j++
		}
		if j == len(r.batch) {
			return nil, fmt.Errorf("rg reported %q out of order", p)
		}
		r.take(j)
		return &rgFile{item: j, lines: map[int][]byte{}}, nil
	case "match", "context":
		if cur == nil {
			return nil, fmt.Errorf("rg output: %s outside a file", m.Type)
		}
		n := m.Data.LineNumber
		cur.lines[n] = trimCR(bytes.TrimSuffix(m.Data.Lines.bytes(), []byte{'\n'}))
		if m.Type == "match" && len(m.Data.Submatches) > 0 {
			cur.matches = append(cur.matches, rgHit{n, m.Data.Submatches[0].Start})
		}
	case "end":
		if cur != nil {
			return nil, r.finish(cur)
		}
	}
	return cur, nil
}

// finish takes the file rg has finished and emits its matches.
func (r *rgRunner) finish(f *rgFile) error {
	r.take(f.item + 1)
	e := r.batch[f.item].e
	for _, h := range f.matches {
		if h.line <= e.from {
			continue
		}
		var before, after [][]byte
		for n := max(1, h.line-r.g.context); n < h.line; n++ {
			before = append(before, f.lines[n])
		}
		for n := h.line + 1; n <= h.line+r.g.context; n++ {
			l, ok := f.lines[n]
			if !ok {
				break
			}
			after = append(after, l)
		}
		m := makeMatch(e.abs, h.line, f.lines[h.line], h.col, before, after)
		if err := r.g.accept(m, e.rel); err != nil {
			return err
		}
	}
	return nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	b   []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.b = append(c.b, p[:min(len(p), c.max-len(c.b))]...)
	return len(p), nil
}
