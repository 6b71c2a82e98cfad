package sse

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s to dst as a quoted JSON string and returns the
// extended slice. Like encoding/json, it escapes quotes, backslashes and
// control characters, writes U+2028 and U+2029 as escapes, and replaces
// each byte of invalid UTF-8 with U+FFFD, so the result is always valid
// JSON on one line whatever bytes a process printed. Unlike encoding/json it
// does not escape '<', '>' and '&': the output is never embedded in HTML,
// and skipping them keeps the common case a plain copy.
//
// It exists because the streaming endpoints encode millions of lines a
// second; encoding/json costs an allocation and reflection per line.
func AppendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = AppendJSONEscaped(dst, s)
	return append(dst, '"')
}

// AppendJSONEscaped appends s to dst escaped as AppendJSONString does, but
// without the quotes, so that a long string can be written in pieces. A
// piece that ends inside a UTF-8 sequence gets U+FFFD for its last bytes:
// cut pieces where utf8.FullRune says a sequence is whole.
func AppendJSONEscaped(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}
