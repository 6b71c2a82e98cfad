// Package sse encodes and decodes the Server-Sent Events wire format as the
// agent speaks it: every event is an optional "id:" line, one "event:" line,
// exactly one "data:" line holding one line of JSON, and a blank line.
// Comment lines (": ping") keep idle streams alive.
//
// The package knows nothing about processes or commands; handlers own the
// loop that decides what to send and when to flush.
package sse

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// flushThreshold is the buffered size above which Writer hands its buffer to
// the connection even before Flush is called, so that a large batch of
// events never sits in memory as a whole.
const flushThreshold = 64 << 10

// Writer buffers events and writes them to an HTTP response. Events are
// appended to an internal buffer; Flush sends the buffer and flushes the
// connection. Callers append a whole batch of events (everything that is
// ready now) and then call Flush once: that is what makes one event per
// syscall unnecessary without delaying any event.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	// StallTimeout, if positive, bounds each write to the client: a
	// client that accepts nothing for that long is taken as gone, and the
	// write fails. Without it, a client that stays connected but never
	// reads would hold the stream, and what feeds it, forever.
	StallTimeout time.Duration

	w         http.ResponseWriter
	rc        *http.ResponseController
	buf       []byte
	err       error
	lastWrite time.Time // when bytes last went to the client
}

// NewWriter sets the event-stream headers on w, sends the 200 status and
// flushes it, so the client sees the stream open at once. The status of the
// response must therefore be decided before NewWriter is called.
func NewWriter(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: w, rc: http.NewResponseController(w), buf: make([]byte, 0, 4096), lastWrite: time.Now()}
	s.err = s.rc.Flush()
	return s
}

// Err returns the first write error seen. A write error means the client
// has gone; every later call is a no-op.
func (s *Writer) Err() error { return s.err }

// AppendEvent buffers one event. data must be one line of JSON (no raw
// newline); id, if not empty, is sent as the event's "id:" line.
func (s *Writer) AppendEvent(id, name string, data []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = AppendEvent(s.buf, id, name, data)
	return s.maybeWrite()
}

// AppendEventFunc buffers one event whose data is produced by appendData,
// which appends one line of JSON to its argument and returns it. It avoids
// an intermediate buffer on hot paths.
func (s *Writer) AppendEventFunc(id uint64, name string, appendData func([]byte) []byte) error {
	if s.err != nil {
		return s.err
	}
	if id != 0 {
		s.buf = append(s.buf, "id: "...)
		s.buf = strconv.AppendUint(s.buf, id, 10)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = appendData(s.buf)
	s.buf = append(s.buf, "\n\n"...)
	return s.maybeWrite()
}

// AppendPrepared buffers one event given as prepared wire text: head, then
// value as a JSON string, then tail. head holds the event's lines up to the
// JSON string in its data (see EventHead), tail the rest of the data and
// the blank line that ends the event, such as "}\n\n". Streams that send
// many events of one shape prepare head and tail once, and each event is
// then three appends.
func (s *Writer) AppendPrepared(head, value []byte, tail string) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(s.buf, head...)
	s.buf = AppendJSONString(s.buf, value)
	s.buf = append(s.buf, tail...)
	return s.maybeWrite()
}

// EventHead appends to dst the head of an event for AppendPrepared: the
// "id:" line unless id is 0, the "event:" line, and "data: " followed by
// dataPrefix, the JSON that comes before the string value.
func EventHead(dst []byte, id uint64, name, dataPrefix string) []byte {
	if id != 0 {
		dst = append(dst, "id: "...)
		dst = strconv.AppendUint(dst, id, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	return append(dst, dataPrefix...)
}

// Event buffers one event named name whose data is v encoded as JSON, and
// flushes. json.Marshal never emits a raw newline, so the data always fits
// on one "data:" line.
func (s *Writer) Event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.AppendEvent("", name, data); err != nil {
		return err
	}
	return s.Flush()
}

// Comment buffers a comment line (": text"), which clients ignore and
// proxies see as traffic, and flushes.
func (s *Writer) Comment(text string) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(s.buf, ": "...)
	s.buf = append(s.buf, text...)
	s.buf = append(s.buf, "\n\n"...)
	return s.Flush()
}

// PingIfIdle sends a ": ping" comment if nothing has been written for
// every, less a tenth so that a ticker of period every never skips one, and
// returns the write error, if any.
func (s *Writer) PingIfIdle(every time.Duration) error {
	if s.err != nil || time.Since(s.lastWrite) < every-every/10 {
		return s.err
	}
	return s.Comment("ping")
}

// Buffered reports how many bytes are waiting for Flush.
func (s *Writer) Buffered() int { return len(s.buf) }

// Flush writes the buffered events and flushes the connection.
func (s *Writer) Flush() error {
	if s.err != nil {
		return s.err
	}
	s.setDeadline()
	if err := s.write(); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

func (s *Writer) maybeWrite() error {
	if len(s.buf) < flushThreshold {
		return nil
	}
	s.setDeadline()
	return s.write()
}

// setDeadline starts the stall timeout for the write that follows. A
// ResponseWriter that has no deadlines (a test's recorder) goes without.
func (s *Writer) setDeadline() {
	if s.StallTimeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.StallTimeout))
	}
}

func (s *Writer) write() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		s.err = err
	}
	s.lastWrite = time.Now()
	return err
}

// AppendEvent appends one event in wire format to dst and returns the
// extended slice. data must be one line of JSON.
func AppendEvent(dst []byte, id, name string, data []byte) []byte {
	if id != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, id...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}
