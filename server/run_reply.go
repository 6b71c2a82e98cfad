package server

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// smallReply is the most output that writeRunReply escapes into one buffer
// (at most six times as many bytes) rather than streaming it.
const smallReply = 8 << 10

// writeRunReply writes the JSON body of a /run reply to w:
//
//	{"stdout":"...","stderr":"...","error":"...","code":N,"truncated":true,"session_error":"..."}
//
// with error only when msg is not empty, truncated only when true,
// session_error only when sessionErr is not empty and termination only
// when term is not nil, followed by a newline, as encoding/json's Encoder would write it, except
// that '<', '>' and '&' are not escaped (as in /run_streaming's events).
// Output is escaped straight from out's buffers in bounded pieces (see
// sse.JSONString): however large the output, and escaping can make it six
// times larger, the reply is never built whole.
func writeRunReply(w io.Writer, out *executor.Output, msg, sessionErr string, term *executor.Termination) error {
	return writeRunReplyMore(w, out, msg, sessionErr, appendRunExtra(nil, term, 0, 0, nil))
}

// writeRunReplyMore is writeRunReply with more, the fields of
// appendRunExtra, before the closing brace.
func writeRunReplyMore(w io.Writer, out *executor.Output, msg, sessionErr string, more []byte) error {
	if len(out.Stdout)+len(out.Stderr) <= smallReply {
		b := make([]byte, 0, 64+len(msg)+2*(len(out.Stdout)+len(out.Stderr)))
		b = append(b, `{"stdout":`...)
		b = sse.AppendJSONString(b, out.Stdout)
		b = append(b, `,"stderr":`...)
		b = sse.AppendJSONString(b, out.Stderr)
		b = appendRunReplyEnd(b, out, msg, sessionErr, more)
		_, err := w.Write(b)
		return err
	}
	if _, err := io.WriteString(w, `{"stdout":`); err != nil {
		return err
	}
	if err := writeJSONString(w, out.Stdout); err != nil {
		return err
	}
	if _, err := io.WriteString(w, `,"stderr":`); err != nil {
		return err
	}
	if err := writeJSONString(w, out.Stderr); err != nil {
		return err
	}
	_, err := w.Write(appendRunReplyEnd(nil, out, msg, sessionErr, more))
	return err
}

// appendRunExtra appends the fields of a /run reply that only its new
// features bring: termination, omitted_bytes when some were, and missed
// when some were, and middle when it is known.
func appendRunExtra(b []byte, t *executor.Termination, omitted, missed int64, middle *middleRef) []byte {
	if t != nil {
		tj, _ := json.Marshal(t) // a struct of two strings
		b = append(b, `,"termination":`...)
		b = append(b, tj...)
	}
	if omitted > 0 {
		b = append(b, `,"omitted_bytes":`...)
		b = strconv.AppendInt(b, omitted, 10)
	}
	if missed > 0 {
		b = append(b, `,"missed":`...)
		b = strconv.AppendInt(b, missed, 10)
	}
	if middle != nil {
		mj, _ := json.Marshal(middle) // a string and two numbers
		b = append(b, `,"middle":`...)
		b = append(b, mj...)
	}
	return b
}

// appendRunReplyEnd appends the fields of a /run reply after stderr, and
// the closing brace and newline.
func appendRunReplyEnd(b []byte, out *executor.Output, msg, sessionErr string, more []byte) []byte {
	if msg != "" {
		b = append(b, `,"error":`...)
		b = sse.AppendJSONString(b, []byte(msg))
	}
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(out.Code), 10)
	if out.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if sessionErr != "" {
		b = append(b, `,"session_error":`...)
		b = sse.AppendJSONString(b, []byte(sessionErr))
	}
	b = append(b, more...)
	return append(b, "}\n"...)
}

// writeJSONString writes p to w as one JSON string, in bounded pieces.
func writeJSONString(w io.Writer, p []byte) error {
	j := sse.NewJSONString(w)
	if _, err := j.Write(p); err != nil {
		return err
	}
	return j.Close()
}
