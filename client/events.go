package client

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

// EventType is the name of an event on the wire.
type EventType string

const (
	// EventOutput is a line of a RunStream command: Stream and Data.
	EventOutput EventType = "output"
	// EventLog is a line of a background process: Seq, Time, Stream and
	// Data.
	EventLog EventType = "log"
	// EventMissed tells a log reader that Missed lines were dropped from
	// the agent's buffer before it could read them; Message says so in
	// words. The lines that follow continue after the gap.
	EventMissed EventType = "missed"
	// EventComplete ends a stream. For RunStream it carries the command's
	// Code, Truncated, and a Message if its timeout stopped it; for logs,
	// a Message ("stream ended").
	EventComplete EventType = "complete"
)

// Stream names the output a line came from.
type Stream string

const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Event is one event of RunStream, ProcessLogs or FollowLogs. Which fields
// are set depends on Type; the others are zero.
type Event struct {
	Type EventType
	// Seq is a log line's number in its process, from 1: the SSE id that
	// a reader resumes after.
	Seq    uint64
	Time   time.Time // when the agent read a log line; zero for output
	Stream Stream
	// Data is the line, without its newline. It points into the stream's
	// buffer and is valid only until the loop body returns: copy it
	// (string(ev.Data), bytes.Clone) to keep it.
	Data []byte
	// Code is a RunStream command's exit code (128+n if signal n ended
	// it, 124 for a timeout).
	Code int
	// Truncated reports that the agent dropped part of a RunStream
	// command's output; agents before it was added never set it.
	Truncated bool
	Missed    uint64 // for EventMissed
	Message   string
}

// streamError is a stream cut before its complete event: a follower may
// reconnect and resume.
type streamError struct{ err error }

func (e *streamError) Error() string {
	return "the event stream from the agent was cut before its end: " + e.err.Error()
}

func (e *streamError) Unwrap() error { return e.err }

// eventReader decodes the events of one stream. Its Events point into its
// buffers (see Event.Data).
type eventReader struct {
	r    *sse.Reader
	data eventData
	// The timestamp of the last log event and its parse: the lines of
	// one read from a pipe share theirs, and parsing costs more than
	// the rest of the event.
	lastStamp []byte
	lastTime  time.Time
}

func newEventReader(body io.Reader) *eventReader {
	return &eventReader{r: sse.NewReader(body)}
}

// next returns the next event the client knows; events of other names are
// skipped, for agents newer than the client. An error event becomes an
// *Error with status 200. The end of the stream before a complete event
// is a *streamError.
func (er *eventReader) next() (Event, error) {
	for {
		raw, err := er.r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Event{}, &streamError{err}
		}
		typ, known := eventType(raw.Name)
		if !known {
			continue
		}
		if err := er.data.decode(raw.Data); err != nil {
			return Event{}, fmt.Errorf("the agent sent a malformed %s event: %w (data %q)", raw.Name, err, raw.Data)
		}
		d := &er.data
		if typ == "error" {
			return Event{}, &Error{StatusCode: 200, Message: string(d.errText)}
		}
		ev := Event{Type: typ}
		switch typ {
		case EventOutput:
			ev.Stream, ev.Data = toStream(d.stream), d.data
		case EventLog:
			seq, ok := parseUint(raw.ID)
			if !ok {
				return Event{}, fmt.Errorf("the agent sent a log event with id %q, not a line number", raw.ID)
			}
			ev.Seq, ev.Stream, ev.Data = seq, toStream(d.stream), d.data
			ev.Time = er.stamp(d.timestamp)
		case EventMissed:
			ev.Missed, ev.Message = uint64(max(d.missed, 0)), string(d.message)
		case EventComplete:
			ev.Code, ev.Truncated, ev.Message = int(d.code), d.truncated, string(d.message)
		}
		return ev, nil
	}
}

// eventType maps an event name to its EventType without allocating;
// "error" is returned as such, for next to turn into an error.
func eventType(name []byte) (EventType, bool) {
	switch string(name) {
	case "output":
		return EventOutput, true
	case "log":
		return EventLog, true
	case "missed":
		return EventMissed, true
	case "complete":
		return EventComplete, true
	case "error":
		return "error", true
	}
	return "", false
}

func toStream(b []byte) Stream {
	switch string(b) {
	case "stdout":
		return Stdout
	case "stderr":
		return Stderr
	}
	return Stream(b)
}

// stamp parses an RFC 3339 timestamp, reusing the last parse when the text
// is the same. A timestamp that does not parse gives the zero time.
func (er *eventReader) stamp(b []byte) time.Time {
	if string(b) == string(er.lastStamp) && er.lastStamp != nil {
		return er.lastTime
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		t = time.Time{}
	}
	er.lastStamp = append(er.lastStamp[:0], b...)
	er.lastTime = t
	return t
}
