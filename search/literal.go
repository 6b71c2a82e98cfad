package search

import "bytes"

// commonBytes lists bytes from the most frequent in source code and
// prose to the less frequent; a byte not listed is taken as rare.
const commonBytes = " etaoinsrhldcum\n\tfpgwyb,.v()k;=\"_-/:'0x1{}2E*ST#ACRIN>jq<LOD3PM[]z45F6B9H78\\G+U&!WV@|KYXZQJ$%~`^?"

// literal finds a fixed string by looking first for its rarest byte
// (memchr-fast), rather than for its first one, which in a source tree
// is often a common letter that stops the scan on every other word.
type literal struct {
	s    []byte
	off  int  // where the rarest byte is in s
	rare byte // s[off]
}

func newLiteral(s []byte) *literal {
	l := &literal{s: s}
	best := -1
	for i, c := range s {
		r := bytes.IndexByte([]byte(commonBytes), c)
		if r < 0 {
			r = len(commonBytes)
		}
		if r > best {
			best, l.off, l.rare = r, i, c
		}
	}
	return l
}

// index returns the first offset of l in data, or -1.
func (l *literal) index(data []byte) int {
	if len(l.s) < 2 || len(data) < len(l.s) {
		return bytes.Index(data, l.s)
	}
	for pos := 0; ; {
		i := bytes.IndexByte(data[pos+l.off:], l.rare)
		if i < 0 {
			return -1
		}
		start := pos + i
		if start+len(l.s) <= len(data) && bytes.Equal(data[start:start+len(l.s)], l.s) {
			return start
		}
		pos = start + 1
		if pos+len(l.s) > len(data) {
			return -1
		}
	}
}
