package sse

import (
	"bytes"
	"errors"
	"io"
)

// Event is one parsed event. Its slices point into the Reader's buffer and
// are valid only until the next call to Next.
type Event struct {
	ID   []byte // the event's "id:" field; nil if it had none
	Name []byte // the "event:" field; empty means "message"
	Data []byte // the "data:" lines joined by "\n"
}

// Reader parses an event stream. It follows the HTML specification's rules
// for fields and comments, for lines ending in "\n" or "\r\n". It parses
// each event where it lies in its buffer, without copying, which is what
// lets one core parse millions of events a second.
type Reader struct {
	r          io.Reader
	buf        []byte
	start, end int    // buf[start:end] is read and not yet parsed
	err        error  // the read error that ends the stream, once seen
	joined     []byte // the data of an event with several data lines
	ev         Event  // the event parse found; a field, to spare copies

	// Comments counts the comment lines (": ping") seen so far.
	Comments int
}

// NewReader returns a Reader that reads from r with a 64 KiB buffer, which
// grows for an event larger than that.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: make([]byte, 64<<10)}
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// or io.ErrUnexpectedEOF if the stream ended inside an event or a line: an
// event not terminated by a blank line is discarded, as the specification
// says, and this error says so.
func (r *Reader) Next() (Event, error) {
	for {
		used, skip, comments := r.parse(r.buf[r.start:r.end])
		r.Comments += comments
		if used > 0 {
			r.start += used
			return r.ev, nil
		}
		r.start += skip // comments and blank lines: nothing to keep
		if r.err != nil {
			if r.start < r.end {
				return Event{}, io.ErrUnexpectedEOF
			}
			if errors.Is(r.err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, r.err
		}
		r.fill()
	}
}

// fill reads more of the stream, first moving what is unparsed to the
// front of the buffer, or growing it if that is full.
func (r *Reader) fill() {
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		r.buf = append(r.buf, make([]byte, len(r.buf))...)
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	if err != nil {
		r.err = err
	}
}

// parse looks for one whole event at the start of b. If there is one, it
// stores it in r.ev and returns the bytes it used, blank lines and comments before it
// included. If not, used is 0 and skip is how many bytes at the start hold
// only comments and blank lines, which need not be parsed again. comments
// counts the comment lines in what is used or skipped.
func (r *Reader) parse(b []byte) (used, skip, comments int) {
	ev := &r.ev
	*ev = Event{}
	var hasData, hasID bool
	var dataLines int
	pending := 0 // comments seen since the last skip point
	pos := 0
	for {
		nl := bytes.IndexByte(b[pos:], '\n')
		if nl < 0 {
			return 0, skip, comments
		}
		line := b[pos : pos+nl]
		pos += nl + 1
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			if hasData || hasID || len(ev.Name) > 0 {
				if dataLines > 1 {
					ev.Data = r.joinData(b[:pos])
				}
				return pos, 0, comments + pending
			}
			skip, comments, pending = pos, comments+pending, 0
			continue
		}
		if line[0] == ':' {
			pending++
			if !hasData && !hasID && len(ev.Name) == 0 {
				skip, comments, pending = pos, comments+pending, 0
			}
			continue
		}
		switch {
		// The fields this agent sends come first, recognised by their
		// prefix without a search for the colon.
		case bytes.HasPrefix(line, dataPrefix):
			ev.Data, hasData = trimSpace1(line[len(dataPrefix):]), true
			dataLines++
		case bytes.HasPrefix(line, eventPrefix):
			ev.Name = trimSpace1(line[len(eventPrefix):])
		default:
			field, value := splitField(line)
			switch string(field) {
			case "event":
				ev.Name = value
			case "data":
				ev.Data, hasData = value, true
				dataLines++
			case "id":
				ev.ID, hasID = value, true
			}
		}
	}
}

var (
	dataPrefix  = []byte("data:")
	eventPrefix = []byte("event:")
)

// trimSpace1 drops the one space that may follow a field's colon.
func trimSpace1(value []byte) []byte {
	if len(value) > 0 && value[0] == ' ' {
		return value[1:]
	}
	return value
}

// joinData returns the data lines of the event in b joined by "\n", in a
// buffer of r's own: rare enough not to be worth parsing twice for.
func (r *Reader) joinData(b []byte) []byte {
	r.joined = r.joined[:0]
	first := true
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		line := b[:nl]
		b = b[nl+1:]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if field, value := splitField(line); string(field) == "data" {
			if !first {
				r.joined = append(r.joined, '\n')
			}
			r.joined = append(r.joined, value...)
			first = false
		}
	}
	return r.joined
}

// splitField splits "field: value" at the first colon and drops one space
// after it; a line without a colon is a field with an empty value.
func splitField(line []byte) (field, value []byte) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return line, line[len(line):]
	}
	return line[:i], trimSpace1(line[i+1:])
}
