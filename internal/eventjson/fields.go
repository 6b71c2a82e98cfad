// Package eventjson decodes the data of the agent's events, each a flat
// JSON object, by hand: without reflection or an allocation per event,
// since event streams carry millions of events a second and encoding/json
// would cost more than the agent does to send them. The Go client decodes
// every stream with it, and the benchmark's streaming figure measures
// with it.
package eventjson

import (
	"errors"
	"unicode/utf8"
)

// Fields holds the fields of one event's data, such as
// {"stream":"stdout","data":"42"}, {"timestamp":"…","stream":"stdout",
// "data":"42"}, {"missed":3,"message":"…"}, {"code":0,"error":false} or
// {"error":"…"}. Decode fills it; values of any type under keys it does
// not know are skipped, so that a field added to an event later does not
// break older clients.
//
// The zero Fields is ready to use. Its slices point into the decoded data
// or into its own scratch space, and are valid until the next Decode.
type Fields struct {
	Stream, Data, Timestamp, Message []byte // nil if absent
	Error                            []byte // "error" when it is a string (an error event); nil otherwise
	Missed, Code                     int64  // 0 if absent
	Truncated                        bool
	scratch                          []byte // strings that held escapes are unescaped here
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

var errNotObject = errors.New("json: not an object")

// Decode parses b, which must be exactly one JSON object. The keys it
// knows must hold the type the agent sends; other keys may hold any JSON
// value and are skipped. Strings may hold any escape JSON allows; \u
// escapes that are not valid UTF-16 become U+FFFD, as with encoding/json.
func (f *Fields) Decode(b []byte) error {
	f.Stream, f.Data, f.Timestamp, f.Message, f.Error = nil, nil, nil, nil, nil
	f.Missed, f.Code, f.Truncated, f.scratch = 0, 0, false, f.scratch[:0]
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
		// The fast path of value for a string without escapes.
		j = i + 1
		if i < len(b) && b[i] == '"' {
			for j < len(b) && plainBytes[b[j]] != 0 {
				j++
			}
		}
		if i < len(b) && b[i] == '"' && j < len(b) && b[j] == '"' && f.setString(key, b[i+1:j]) {
			i = j + 1
		} else {
			var err error
			if i, err = f.value(b, i, key); err != nil {
				return err
			}
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

// setString stores string value s under key, if key is one whose value
// may be a string, and reports whether it may; an unknown key's string is
// skipped.
func (f *Fields) setString(key, s []byte) bool {
	switch string(key) {
	case "stream":
		f.Stream = s
	case "data":
		f.Data = s
	case "timestamp":
		f.Timestamp = s
	case "message":
		f.Message = s
	case "error": // an error event; in complete it is a boolean
		f.Error = s
	case "missed", "code", "truncated":
		return false // not a string: value reports it
	}
	return true
}

// value parses the value at b[i:], stores it if key is one f knows, and
// returns the offset just after it.
func (f *Fields) value(b []byte, i int, key []byte) (int, error) {
	if i >= len(b) {
		return i, syntaxError(b, i, "a value")
	}
	switch string(key) {
	case "stream", "data", "timestamp", "message":
		s, j, err := f.str(b, i)
		if err == nil {
			f.setString(key, s)
		}
		return j, err
	case "missed", "code":
		n, j, err := parseInt(b, i)
		if key[0] == 'm' {
			f.Missed = n
		} else {
			f.Code = n
		}
		return j, err
	case "error":
		if b[i] == '"' {
			s, j, err := f.str(b, i)
			f.Error = s
			return j, err
		}
	case "truncated":
		if j, ok := literal(b, i, "true"); ok {
			f.Truncated = true
			return j, nil
		}
	}
	return skipValue(b, i, 0)
}

// str parses the string whose opening quote is at b[i]. A string without
// escapes is returned as a slice of b; one with escapes is unescaped into
// f.scratch. It returns the offset just after the closing quote.
func (f *Fields) str(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, syntaxError(b, i, "a string")
	}
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
