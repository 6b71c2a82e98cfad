package search

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// rgPattern returns the pattern rg is given for req, and whether rg
// reads it exactly as Go's regexp does on one line. A regular expression
// qualifies only if it is built from what both engines define alike:
// literals (ASCII ones when case is folded), classes of ASCII characters
// (not negated: a negated class matches invalid UTF-8 in Go, not in
// rg), repetition, alternation, groups and line anchors. It is given to
// rg as Go prints its parse, so classes such as \d and \s are spelled out
// as the ASCII sets RE2 means (rg's are Unicode). Not qualifying, and so
// left to the Go engine: ".", "\b" and "\B" (Unicode in rg, ASCII in
// RE2), non-ASCII classes, "\A" and "\z" (rg's are the file's start and
// end), a pattern that matches the empty string (rg reports such matches
// differently), and "\n" or "\r" (never in a line's text).
func rgPattern(req GrepRequest) (string, bool) {
	p := req.Pattern
	if p == "" || bytes.ContainsAny([]byte(p), "\r\n") {
		return "", false
	}
	if req.Fixed {
		return p, !req.IgnoreCase || isASCII(p)
	}
	if req.IgnoreCase {
		p = "(?i)" + p
	}
	re, err := syntax.Parse(p, syntax.Perl&^syntax.OneLine)
	if err != nil || !rgSafe(re) {
		return "", false
	}
	if regexp.MustCompile(p).MatchString("") {
		return "", false
	}
	return re.String(), true
}

func rgSafe(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' || r == '\r' || (re.Flags&syntax.FoldCase != 0 && r >= utf8.RuneSelf) {
				return false
			}
		}
	case syntax.OpCharClass:
		for i := 0; i < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= utf8.RuneSelf || (lo <= '\n' && hi >= '\n') || (lo <= '\r' && hi >= '\r') {
				return false
			}
		}
	case syntax.OpConcat, syntax.OpAlternate, syntax.OpCapture, syntax.OpStar, syntax.OpPlus,
		syntax.OpQuest, syntax.OpRepeat, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpEmptyMatch:
	default:
		return false
	}
	for _, s := range re.Sub {
		if !rgSafe(s) {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
