package sse

import (
	"io"
	"unicode/utf8"
)

const (
	// jsonPiece is how many input bytes JSONString escapes at a time. An
	// escaped byte takes at most six ("\u0000"), so the buffer never holds
	// more than jsonFlushAt plus six pieces' worth.
	jsonPiece = 4 << 10
	// jsonFlushAt is the buffered size at which JSONString writes to w.
	jsonFlushAt = 32 << 10
)

// JSONString writes one JSON string value to w as its bytes arrive, in
// bounded memory: a reply that carries megabytes of output or file content
// is never built whole. It escapes exactly as AppendJSONString does
// (invalid UTF-8 becomes U+FFFD; '<', '>' and '&' are not escaped), whatever
// the sizes of the pieces it is given: a UTF-8 sequence split between two
// Writes is joined first.
//
// Create it with NewJSONString, which writes the opening quote; Close writes
// the closing one. It is not safe for concurrent use.
type JSONString struct {
	w     io.Writer
	buf   []byte
	carry []byte // the start of a UTF-8 sequence cut by the end of the last Write
	err   error  // the first write error; every later call returns it
}

// NewJSONString returns a JSONString that writes to w, and writes the
// opening quote (to its buffer; nothing reaches w before jsonFlushAt bytes
// or Close).
func NewJSONString(w io.Writer) *JSONString {
	j := &JSONString{w: w, buf: make([]byte, 0, jsonFlushAt+6*jsonPiece), carry: make([]byte, 0, utf8.UTFMax)}
	j.buf = append(j.buf, '"')
	return j
}

// Write escapes p into the string. It returns len(p) unless writing to w
// failed.
func (j *JSONString) Write(p []byte) (int, error) {
	if j.err != nil {
		return 0, j.err
	}
	n := len(p)
	if len(j.carry) > 0 {
		// Only continuation bytes can complete the sequence; any other
		// byte ends it, invalid, as it would in the whole string.
		for len(p) > 0 && !utf8.FullRune(j.carry) && !utf8.RuneStart(p[0]) {
			j.carry = append(j.carry, p[0])
			p = p[1:]
		}
		if len(p) == 0 && !utf8.FullRune(j.carry) {
			return n, nil // still cut: wait for the next Write
		}
		j.buf = AppendJSONEscaped(j.buf, j.carry)
		j.carry = j.carry[:0]
	}
	for len(p) > 0 {
		piece := p[:min(len(p), jsonPiece)]
		whole := wholeRunes(piece)
		if whole == 0 {
			// Only the start of a sequence is left (wholeRunes returns 0
			// for nothing longer than three bytes); the next Write may
			// complete it.
			j.carry = append(j.carry, piece...)
			break
		}
		j.buf = AppendJSONEscaped(j.buf, piece[:whole])
		p = p[whole:]
		if len(j.buf) >= jsonFlushAt {
			if err := j.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// wholeRunes returns the length of the longest prefix of p that does not
// end inside a UTF-8 sequence that more bytes could complete.
func wholeRunes(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p) // continuation bytes with no start: invalid, escape them now
}

// Close escapes what is left of a cut sequence (as U+FFFD), writes the
// closing quote and everything buffered to w.
func (j *JSONString) Close() error {
	if j.err != nil {
		return j.err
	}
	j.buf = AppendJSONEscaped(j.buf, j.carry)
	j.carry = j.carry[:0]
	j.buf = append(j.buf, '"')
	return j.flush()
}

func (j *JSONString) flush() error {
	if len(j.buf) == 0 {
		return nil
	}
	_, err := j.w.Write(j.buf)
	j.buf = j.buf[:0]
	j.err = err
	return err
}
