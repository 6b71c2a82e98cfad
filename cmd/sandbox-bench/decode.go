package main

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// eventFields is what the bench reads from the data of an event: one flat
// JSON object such as {"stream":"stdout","data":"42"},
// {"timestamp":"…","stream":"stdout","data":"42"}, {"missed":3,"message":"…"}
// or {"code":0,"error":false}. decode fills it by hand, without reflection
// or an allocation per event, so that the client measures the agent and
// not encoding/json.
//
// The zero eventFields is ready to use. Its slices point into the decoded
// data or into scratch and are valid until the next decode.
type eventFields struct {
	Stream    []byte // the "stream" string; nil if absent
	Data      []byte // the "data" string; nil if absent
	Timestamp []byte // the "timestamp" string; nil if absent
	Missed    int64  // the "missed" number; 0 if absent
	Code      int64  // the "code" number; 0 if absent
	scratch   []byte // strings that held escapes are unescaped here
}

// plainBytes has a 1 at the index of every byte that a JSON string may
// hold unescaped: not a quote, a backslash or a control character.
const plainBytes = "" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x00\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" +
	"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"

var errNotObject = errors.New("json: not a flat object")

// decode parses b, which must be exactly one JSON object whose values are
// strings, integers, true, false or null. Unknown keys are checked and
// skipped. Strings may hold any escape JSON allows; \u escapes that are
// not valid UTF-16 become U+FFFD, as with encoding/json.
func (f *eventFields) decode(b []byte) error {
	f.Stream, f.Data, f.Timestamp, f.Missed, f.Code = nil, nil, nil, 0, 0
	f.scratch = f.scratch[:0]
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return checkEnd(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return syntaxError(b, i, "a key")
		}
		// The fast path of str, inlined: a key without escapes.
		var key []byte
		j := i + 1
		for j < len(b) && plainBytes[b[j]] != 0 {
			j++
		}
		if j < len(b) && b[j] == '"' {
			key, i = b[i+1:j], j+1
		} else {
			var err error
			if key, i, err = f.str(b, i); err != nil {
				return err
			}
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return syntaxError(b, i, "':'")
		}
		i = skipSpace(b, i+1)
		var err error
		if i < len(b) && b[i] == '"' {
			// The fast path of value for a string without escapes.
			j := i + 1
			for j < len(b) && plainBytes[b[j]] != 0 {
				j++
			}
			if j < len(b) && b[j] == '"' {
				f.setString(key, b[i+1:j])
				i = j + 1
			} else if i, err = f.value(b, i, key); err != nil {
				return err
			}
		} else if i, err = f.value(b, i, key); err != nil {
			return err
		}
		i = skipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return checkEnd(b, i+1)
		default:
			return syntaxError(b, i, "',' or '}'")
		}
	}
}

// setString stores string value s under key.
func (f *eventFields) setString(key, s []byte) {
	switch string(key) {
	case "stream":
		f.Stream = s
	case "data":
		f.Data = s
	case "timestamp":
		f.Timestamp = s
	}
}

// value parses the value at b[i:] and stores it under key; it returns the
// offset just after the value.
func (f *eventFields) value(b []byte, i int, key []byte) (int, error) {
	if i >= len(b) {
		return i, syntaxError(b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		s, j, err := f.str(b, i)
		if err != nil {
			return j, err
		}
		f.setString(key, s)
		return j, nil
	case c == '-' || (c >= '0' && c <= '9'):
		n, j, err := parseInt(b, i)
		if err != nil {
			return j, err
		}
		switch string(key) {
		case "missed":
			f.Missed = n
		case "code":
			f.Code = n
		}
		return j, nil
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			return i + len(lit), nil
		}
	}
	return i, syntaxError(b, i, "a string, integer, true, false or null")
}

// str parses the string whose opening quote is at b[i]. A string without
// escapes is returned as a slice of b; one with escapes is unescaped into
// f.scratch. It returns the offset just after the closing quote.
func (f *eventFields) str(b []byte, i int) ([]byte, int, error) {
	j := i + 1
	for j < len(b) && plainBytes[b[j]] != 0 {
		j++
	}
	if j < len(b) && b[j] == '"' {
		return b[i+1 : j], j + 1, nil
	}
	start := len(f.scratch)
	f.scratch = append(f.scratch, b[i+1:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			end := len(f.scratch)
			return f.scratch[start:end:end], j + 1, nil
		case c < 0x20:
			return nil, j, syntaxError(b, j, "no control character in a string")
		case c != '\\':
			f.scratch = append(f.scratch, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			break
		}
		j += 2
		switch e := b[j-1]; e {
		case '"', '\\', '/':
			f.scratch = append(f.scratch, e)
		case 'b':
			f.scratch = append(f.scratch, '\b')
		case 'f':
			f.scratch = append(f.scratch, '\f')
		case 'n':
			f.scratch = append(f.scratch, '\n')
		case 'r':
			f.scratch = append(f.scratch, '\r')
		case 't':
			f.scratch = append(f.scratch, '\t')
		case 'u':
			r, n, err := unicodeEscape(b, j)
			if err != nil {
				return nil, j, err
			}
			f.scratch = utf8.AppendRune(f.scratch, r)
			j = n
		default:
			return nil, j - 1, syntaxError(b, j-1, "a valid escape")
		}
	}
	return nil, j, syntaxError(b, j, "a closing quote")
}

// unicodeEscape decodes the four hex digits at b[i:] (after "\u") and, for
// a high surrogate followed by "\u" and a low one, the pair. It returns the
// rune and the offset after what it used.
func unicodeEscape(b []byte, i int) (rune, int, error) {
	r, ok := hex4(b, i)
	if !ok {
		return 0, i, syntaxError(b, i, "four hex digits")
	}
	i += 4
	if !utf16.IsSurrogate(r) {
		return r, i, nil
	}
	if len(b)-i >= 6 && b[i] == '\\' && b[i+1] == 'u' {
		if r2, ok := hex4(b, i+2); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, i + 6, nil
			}
		}
	}
	return utf8.RuneError, i, nil
}

func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// parseInt parses the JSON integer at b[i:]. Fractions and exponents are
// refused: the agent's counts and codes are integers.
func parseInt(b []byte, i int) (int64, int, error) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if n > (1<<63-1)/10 {
			return 0, i, syntaxError(b, i, "an integer that fits in 64 bits")
		}
		n = n*10 + int64(b[i]-'0')
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return 0, i, syntaxError(b, start, "an integer")
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, i, syntaxError(b, i, "an integer")
	}
	if neg {
		n = -n
	}
	return n, i, nil
}

// parseUint parses a decimal line such as "42"; it reports false for
// anything else.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func checkEnd(b []byte, i int) error {
	if i = skipSpace(b, i); i != len(b) {
		return syntaxError(b, i, "the end")
	}
	return nil
}

func syntaxError(b []byte, i int, want string) error {
	if i >= len(b) {
		return fmt.Errorf("json: unexpected end, want %s", want)
	}
	return fmt.Errorf("json: offset %d: unexpected %q, want %s", i, b[i], want)
}
