package server

import (
	"bytes"
	"unicode/utf8"
)

const (
	// maxKeptString is how much of each JSON string a jsonSkeleton keeps.
	maxKeptString = 64 << 10
	// maxSkeleton bounds a jsonSkeleton as a whole.
	maxSkeleton = 32 << 20
)

// jsonSkeleton keeps a copy of JSON text, as it is written in pieces, in
// bounded memory: each string keeps at most its first maxKeptString bytes
// (cut where a character or an escape sequence starts), which leaves the
// copy as valid, and of the same shape, as the original. That is what a
// schema check needs of a reply that carries megabytes of output or file
// content. Text that is not JSON is copied as it is, up to the bound.
type jsonSkeleton struct {
	buf      []byte
	inString bool
	esc      int  // -1 just after a backslash; n > 0: hex digits of a \u escape still to come
	kept     int  // bytes kept of the current string
	dropping bool // the current string has passed maxKeptString: drop it up to its end
	overflow bool // buf reached maxSkeleton: the copy is incomplete
}

func (s *jsonSkeleton) Write(p []byte) {
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch {
		case !s.inString:
			s.keep(b)
			if b == '"' {
				s.inString, s.kept, s.dropping = true, 0, false
			}
		case s.esc == -1:
			s.esc = 0
			if b == 'u' {
				s.esc = 4
			}
			s.keepInString(b)
		case s.esc > 0:
			s.esc--
			s.keepInString(b)
		case b == '"':
			s.inString = false
			s.keep(b)
		case s.dropping && b != '\\':
			// Skip to the next quote or backslash, the only bytes that
			// matter in a string being dropped.
			j := bytes.IndexAny(p[i:], "\"\\")
			if j < 0 {
				return
			}
			i += j - 1
		case b == '\\':
			s.dropping = s.dropping || s.kept >= maxKeptString
			s.esc = -1
			s.keepInString(b)
		default:
			if utf8.RuneStart(b) {
				s.dropping = s.kept >= maxKeptString
			}
			s.keepInString(b)
		}
	}
}

func (s *jsonSkeleton) keepInString(b byte) {
	if !s.dropping {
		s.keep(b)
		s.kept++
	}
}

func (s *jsonSkeleton) keep(b byte) {
	if len(s.buf) >= maxSkeleton {
		s.overflow = true
		return
	}
	s.buf = append(s.buf, b)
}
