package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Event is one parsed event. Its slices point into the Reader's buffers and
// are valid only until the next call to Next.
type Event struct {
	ID   []byte // the event's "id:" field; nil if it had none
	Name []byte // the "event:" field; empty means "message"
	Data []byte // the "data:" lines joined by "\n"
}

// Reader parses an event stream. It follows the HTML specification's rules
// for fields and comments, for lines ending in "\n" or "\r\n".
type Reader struct {
	br      *bufio.Reader
	line    []byte // a line longer than br's buffer is assembled here
	id      []byte
	name    []byte
	data    []byte
	hasData bool

	// Comments counts the comment lines (": ping") seen so far.
	Comments int
}

// NewReader returns a Reader that reads from r with a 64 KiB buffer.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// an event not terminated by a blank line before the end is discarded, as
// the specification says.
func (r *Reader) Next() (Event, error) {
	r.id, r.name, r.data, r.hasData = r.id[:0], r.name[:0], r.data[:0], false
	hasID := false
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if !r.hasData && len(r.name) == 0 && !hasID {
				continue // blank line with no event: nothing to dispatch
			}
			ev := Event{Name: r.name, Data: r.data}
			if hasID {
				ev.ID = r.id
			}
			return ev, nil
		}
		if line[0] == ':' {
			r.Comments++
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			r.name = append(r.name[:0], value...)
		case "data":
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.hasData = true
		case "id":
			r.id = append(r.id[:0], value...)
			hasID = true
		}
	}
}

// readLine returns the next line without its line ending.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.line = append(r.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			r.line = append(r.line, line...)
		}
		line = r.line
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}
