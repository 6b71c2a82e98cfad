package executor

import (
	"bytes"
	"time"
	"unicode/utf8"
)

// Stream names the pipe a line was read from.
type Stream uint8

// The streams of a command. The zero Stream is not a valid stream.
const (
	Stdout Stream = iota + 1
	Stderr
)

// String returns "stdout" or "stderr", the names used on the wire.
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "unknown"
}

// LineFunc receives the lines of one read from one pipe, in order, each
// without its line ending ("\n" or "\r\n"). t is the time the read
// returned. The slices are only valid during the call: they point into the
// reader's buffer, which the next read overwrites, so a LineFunc that keeps
// a line must copy it.
//
// The stdout and stderr readers call the same LineFunc from two goroutines,
// possibly at the same time; a LineFunc that writes to shared state must
// lock it. A LineFunc that blocks holds up its pipe, and so, once the pipe
// is full, the command itself.
type LineFunc func(s Stream, t time.Time, lines [][]byte)

// lineConsumer returns a consume function for readPipe that splits what is
// read into lines and hands them to fn. A line longer than maxLine is passed
// on in pieces of at most maxLine bytes, cut at a UTF-8 boundary where one
// is near, so that no input can stop the reader: if it stopped, the pipe
// would fill and the child would freeze. A last line without a line ending
// is passed on at EOF.
func lineConsumer(s Stream, maxLine int, fn LineFunc) func([]byte, time.Time, bool) int {
	var lines [][]byte // reused between reads
	return func(b []byte, t time.Time, eof bool) int {
		var used int
		lines, used = splitLines(lines[:0], b, maxLine)
		if eof && used < len(b) {
			lines = append(lines, b[used:])
			used = len(b)
		}
		if len(lines) > 0 {
			fn(s, t, lines)
		}
		return used
	}
}

// splitLines appends to lines the complete lines in b, without their line
// endings, and pieces of at most maxLine bytes of a partial line that is
// longer than maxLine. It returns the lines and the offset of the first byte it
// did not consume, which is at most maxLine bytes from the end of b.
func splitLines(lines [][]byte, b []byte, maxLine int) ([][]byte, int) {
	start := 0
	for {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			break
		}
		if i > maxLine {
			// A long line whose end arrived in the same read: cut its
			// pieces first, then go on looking for the newline.
			cut := pieceLen(b[start:], maxLine)
			lines = append(lines, b[start:start+cut])
			start += cut
			continue
		}
		line := b[start : start+i]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		lines = append(lines, line)
		start += i + 1
	}
	for len(b)-start > maxLine {
		cut := pieceLen(b[start:], maxLine)
		lines = append(lines, b[start:start+cut])
		start += cut
	}
	return lines, start
}

// pieceLen returns where to cut b, which is longer than maxLine: at maxLine,
// or up to three bytes earlier so that a UTF-8 sequence is not split.
func pieceLen(b []byte, maxLine int) int {
	for cut := maxLine; cut > maxLine-utf8.UTFMax && cut > 0; cut-- {
		if utf8.RuneStart(b[cut]) {
			return cut
		}
	}
	return maxLine
}
