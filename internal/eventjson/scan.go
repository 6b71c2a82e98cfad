package eventjson

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanning pieces of eventData.decode: values skipped under unknown
// keys, escapes, numbers and errors.

// maxDepth bounds the nesting of a skipped value.
const maxDepth = 64

// skipValue checks the JSON value at b[i:], of any type, and returns the
// offset just after it.
func skipValue(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxError(b, i, "less nesting")
	}
	if i >= len(b) {
		return i, syntaxError(b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		var scratch Fields // escapes are checked, and the result dropped
		_, j, err := scratch.str(b, i)
		return j, err
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == '{' || c == '[':
		return skipContainer(b, i, depth)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if j, ok := literal(b, i, lit); ok {
			return j, nil
		}
	}
	return i, syntaxError(b, i, "a value")
}

// skipContainer checks the object or array that opens at b[i].
func skipContainer(b []byte, i, depth int) (int, error) {
	isObject := b[i] == '{'
	end := byte(']')
	if isObject {
		end = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == end {
		return i + 1, nil
	}
	var err error
	for {
		if isObject {
			var scratch Fields
			if i >= len(b) || b[i] != '"' {
				return i, syntaxError(b, i, "a key")
			}
			if _, i, err = scratch.str(b, i); err != nil {
				return i, err
			}
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, syntaxError(b, i, "':'")
			}
			i = skipSpace(b, i+1)
		}
		if i, err = skipValue(b, i, depth+1); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == end:
			return i + 1, nil
		default:
			return i, syntaxError(b, i, "',' or the end of a container")
		}
	}
}

// skipNumber checks the JSON number at b[i:], fraction and exponent
// allowed.
func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	intStart := i
	if n := digits(); n == 0 || (n > 1 && b[intStart] == '0') {
		return i, syntaxError(b, start, "a number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, syntaxError(b, start, "a number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, syntaxError(b, start, "a number")
		}
	}
	return i, nil
}

// literal reports whether b[i:] starts with lit, and the offset after it.
func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
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
	limit := uint64(1<<63 - 1) // the largest magnitude: one more for a negative
	if neg {
		limit++
	}
	start := i
	var n uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		d := uint64(b[i] - '0')
		if n > (limit-d)/10 {
			return 0, i, syntaxError(b, i, "an integer that fits in 64 bits")
		}
		n = n*10 + d
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return 0, i, syntaxError(b, start, "an integer")
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, i, syntaxError(b, i, "an integer")
	}
	if neg {
		return int64(-n), i, nil // -(1<<63) wraps to itself, as it should
	}
	return int64(n), i, nil
}

// ParseUint parses a decimal such as an event's id "42"; it reports false
// for anything else.
func ParseUint(b []byte) (uint64, bool) {
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
