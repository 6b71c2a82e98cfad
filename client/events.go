package client

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/sandbox-executor/sandbox-executor/internal/eventjson"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// EventType says what an Event is. Its String is the event's name on the
// wire.
type EventType uint8

const (
	// EventOutput is a line of a RunStream command: Stream and Data.
	EventOutput EventType = iota + 1
	// EventLog is a line of a background process: Seq, Time, Stream and
	// Data.
	EventLog
	// EventMissed tells a log reader that Missed lines were dropped from
	// the agent's buffer before it could read them; Message says so in
	// words. The lines that follow continue after the gap.
	EventMissed
	// EventComplete ends a stream. For RunStream it carries the command's
	// Code, Truncated, and a Message if its timeout stopped it; for logs,
	// a Message ("stream ended").
	EventComplete

	eventError // an error event, which next turns into an *Error
)

func (t EventType) String() string {
	switch t {
	case EventOutput:
		return "output"
	case EventLog:
		return "log"
	case EventMissed:
		return "missed"
	case EventComplete:
		return "complete"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Stream says which output of a command a line came from.
type Stream uint8

const (
	Stdout Stream = iota + 1
	Stderr
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "Stream(" + strconv.Itoa(int(s)) + ")"
}

// Event is one event of RunStream, ProcessLogs or FollowLogs. Which fields
// are set depends on Type; the others are zero.
type Event struct {
	Type EventType
	// Stream is Stdout or Stderr for a line; zero for a stream name the
	// client does not know.
	Stream Stream
	// Truncated reports that the agent dropped part of a RunStream
	// command's output; agents before it was added never set it.
	Truncated bool
	// Seq is a log line's number in its process, from 1: the SSE id that
	// a reader resumes after.
	Seq  uint64
	Time time.Time // when the agent read a log line; zero for output
	// Data is the line, without its newline. It points into the stream's
	// buffer and is valid only until the loop body returns: copy it
	// (string(ev.Data), bytes.Clone) to keep it.
	Data []byte
	// Code is a RunStream command's exit code (128+n if signal n ended
	// it, 124 for a timeout).
	Code    int
	Missed  uint64 // for EventMissed
	Message string
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
	data eventjson.Fields
	// The timestamp of the last log event and its parse: the lines of
	// one read from a pipe share theirs, and parsing costs more than
	// the rest of the event.
	lastStamp []byte
	lastTime  time.Time
}

func newEventReader(body io.Reader) *eventReader {
	return &eventReader{r: sse.NewReader(body)}
}

// next reads the next event the client knows into ev, which must hold the
// event next last read into it, or be zero; events of other
// names are skipped, for agents newer than the client. An error event
// becomes an *Error with status 200. The end of the stream (before a
// complete event, as next's callers stop there) is a *streamError.
func (er *eventReader) next(ev *Event) error {
	for {
		raw, err := er.r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return &streamError{err}
		}
		typ := eventType(raw.Name)
		if typ == 0 {
			continue
		}
		d := &er.data
		if err := d.Decode(raw.Data); err != nil {
			return fmt.Errorf("the agent sent a malformed %s event: %w (data %q)", raw.Name, err, raw.Data)
		}
		switch typ {
		case EventOutput:
			// The hot case: output follows output, and only two fields
			// change (ev holds what next last read into it).
			if ev.Type != EventOutput {
				*ev = Event{Type: EventOutput}
			}
			ev.Stream, ev.Data = toStream(d.Stream), d.Data
		case EventLog:
			seq, ok := eventjson.ParseUint(raw.ID)
			if !ok {
				return fmt.Errorf("the agent sent a log event with id %q, not a line number", raw.ID)
			}
			*ev = Event{Type: typ, Seq: seq, Stream: toStream(d.Stream), Data: d.Data, Time: er.stamp(d.Timestamp)}
		case EventMissed:
			*ev = Event{Type: typ, Missed: uint64(max(d.Missed, 0)), Message: string(d.Message)}
		case EventComplete:
			*ev = Event{Type: typ, Code: int(d.Code), Truncated: d.Truncated, Message: string(d.Message)}
		case eventError:
			return &Error{StatusCode: 200, Message: string(d.Error)}
		}
		return nil
	}
}

// eventType maps an event name to its EventType without allocating; 0 for
// a name the client does not know.
func eventType(name []byte) EventType {
	switch string(name) {
	case "output":
		return EventOutput
	case "log":
		return EventLog
	case "missed":
		return EventMissed
	case "complete":
		return EventComplete
	case "error":
		return eventError
	}
	return 0
}

func toStream(b []byte) Stream {
	switch string(b) {
	case "stdout":
		return Stdout
	case "stderr":
		return Stderr
	}
	return 0
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
