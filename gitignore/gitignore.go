// Package gitignore reads .gitignore files (and rg's .ignore files, which
// share their syntax) and says what they hide, by git's rules: the last
// matching pattern decides, "!" re-includes, a trailing "/" matches
// directories only, a "/" at the start or in the middle anchors a
// pattern to its file's directory, and the globs are git's wildmatch
// ("**" as a whole path element crosses directories; "*", "?" and
// "[...]" do not match "/"; "\" escapes).
//
// A walk keeps the patterns of the files it met on the way down in one
// slice, the deeper ones later, and does not enter an ignored directory:
// that is what makes a deeper file win, and what keeps a "!" from
// re-including a file whose parent directory is ignored.
package gitignore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// Result is what one pattern says about a path.
type Result int

const (
	NoMatch Result = iota // the pattern does not match
	Exclude               // it matches: the path is ignored
	Include               // a "!" pattern matches: the path is not ignored
)

// Pattern is one pattern of an ignore file.
type Pattern struct {
	glob    string // without "!", a leading "/" (when anchored) or the trailing "/"
	base    string // the ignore file's directory below the walk's root, with a trailing "/"; "" at the root
	negate  bool   // it began with "!"
	dirOnly bool   // it ended with "/"
	// anchored patterns hold a "/" (other than a trailing one) and match
	// the path below base; the others match the last element at any depth.
	anchored bool
}

// ParsePattern parses one line of an ignore file in the directory dir
// (its path's elements below the walk's root; nil at the root). It
// returns false for a comment, a blank line and a pattern that matches
// nothing. line holds no newline; a carriage return before it is
// dropped, as are trailing spaces not escaped with "\".
func ParsePattern(line string, dir []string) (Pattern, bool) {
	if i := strings.IndexByte(line, 0); i >= 0 {
		line = line[:i] // git reads a pattern as a C string
	}
	if line == "" || line[0] == '#' {
		return Pattern{}, false
	}
	line = trimTrailingSpaces(strings.TrimSuffix(line, "\r"))
	var p Pattern
	if strings.HasPrefix(line, "!") {
		p.negate, line = true, line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly, line = true, line[:len(line)-1]
	}
	if strings.Contains(line, "/") {
		p.anchored, line = true, strings.TrimPrefix(line, "/")
	}
	if line == "" {
		return Pattern{}, false // "", "!", "/", "//": nothing has an empty name
	}
	p.glob = line
	if len(dir) > 0 {
		p.base = strings.Join(dir, "/") + "/"
	}
	return p, true
}

// trimTrailingSpaces drops the spaces that end s, but not one escaped
// with "\" (nor those before it). Tabs stay, as in git.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if end == len(s) {
				end = i
			}
		case '\\':
			i++
			fallthrough
		default:
			end = len(s)
		}
	}
	return s[:end]
}

// Match says what p says about path: slash-separated, below the walk's
// root, with no leading or trailing "/". isDir tells whether it is a
// directory (a symbolic link to one is not).
func (p Pattern) Match(path string, isDir bool) Result {
	if p.dirOnly && !isDir {
		return NoMatch
	}
	rest, ok := strings.CutPrefix(path, p.base)
	if !ok || rest == "" {
		return NoMatch
	}
	if !p.anchored {
		rest = rest[strings.LastIndexByte(rest, '/')+1:]
	}
	if !wildmatch(p.glob, rest, p.anchored) {
		return NoMatch
	}
	if p.negate {
		return Include
	}
	return Exclude
}

// Ignored reports whether the patterns hide path: the last one that
// matches decides. Patterns of a deeper ignore file come later in ps.
func Ignored(ps []Pattern, path string, isDir bool) bool {
	for i := len(ps) - 1; i >= 0; i-- {
		switch ps[i].Match(path, isDir) {
		case Exclude:
			return true
		case Include:
			return false
		}
	}
	return false
}

// MaxLine is the longest line Read keeps, in bytes. A longer one is
// skipped (read to its end, so the lines after it still count): a path
// is at most 4 KiB, so such a line is no pattern anyone meant.
const MaxLine = 64 << 10

// Read appends to ps the patterns of the ignore file r, which is in the
// directory dir (as for ParsePattern). A UTF-8 byte order mark at its
// start is skipped, as git does. It reads r to its end, or until an
// error, which it returns with the patterns read before it.
func Read(r io.Reader, dir []string, ps []Pattern) ([]Pattern, error) {
	br := bufio.NewReader(r)
	var long []byte  // a line longer than br's buffer, so far
	tooLong := false // the line so far is over MaxLine: it is skipped
	for first := true; ; first = false {
		part, err := br.ReadSlice('\n')
		if first {
			part = bytes.TrimPrefix(part, []byte("\xef\xbb\xbf"))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			tooLong = tooLong || len(long)+len(part) > MaxLine
			if !tooLong {
				long = append(long, part...)
			}
			continue
		}
		line := part
		if long != nil {
			line = append(long, part...)
			long = nil
		}
		if !tooLong && len(line) <= MaxLine {
			if p, ok := ParsePattern(string(bytes.TrimSuffix(line, []byte("\n"))), dir); ok {
				ps = append(ps, p)
			}
		}
		tooLong = false
		if err == io.EOF {
			return ps, nil
		}
		if err != nil {
			return ps, err
		}
	}
}
