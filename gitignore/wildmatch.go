package gitignore

import "strings"

// outcome is what one attempt at a match says. Besides yes and no, it
// says how far back a failure reaches, which is what keeps a pattern of
// many stars from trying every split of the text: abortAll means no
// later start for any enclosing star can match either, and
// abortToStarStar that only an enclosing "**" (which may cross a "/")
// can still do better.
type outcome int

const (
	matched outcome = iota
	noMatch
	abortAll
	abortToStarStar
)

// wildmatch reports whether text matches pattern by git's wildmatch
// rules, byte by byte (a "?" is one byte, not one rune). With pathname,
// "*", "?" and a bracket expression never match a "/", and only a "**"
// that is a whole path element crosses them.
func wildmatch(pattern, text string, pathname bool) bool {
	return wild(pattern, text, pathname) == matched
}

// at is s[i], or 0 past its end: a path never holds a NUL, so 0 marks
// the end for the pattern and the text alike.
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

func wild(p, t string, pathname bool) outcome {
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pc, tc := p[pi], at(t, ti)
		if tc == 0 && pc != '*' {
			return abortAll
		}
		switch pc {
		case '\\':
			// The next byte is literal; a trailing "\" matches nothing.
			pi++
			if pi == len(p) || tc != p[pi] {
				return noMatch
			}
		case '?':
			if pathname && tc == '/' {
				return noMatch
			}
		case '*':
			r, np, nt, done := star(p, t, pi, ti, pathname)
			if done {
				return r
			}
			// A single "*" before a "/" took the rest of this element:
			// the loop consumes both slashes.
			pi, ti = np, nt
		case '[':
			end, ok, r := class(p, pi, tc)
			if r != matched {
				return r
			}
			if !ok || (pathname && tc == '/') {
				return noMatch
			}
			pi = end
		default:
			if tc != pc {
				return noMatch
			}
		}
	}
	if ti < len(t) {
		return noMatch
	}
	return matched
}

// star matches the run of stars at p[pi:] against t[ti:]. It returns
// done and the outcome, or, for a single "*" followed by a "/" where the
// text has one too, not done and where those two slashes are.
func star(p, t string, pi, ti int, pathname bool) (r outcome, np, nt int, done bool) {
	first := pi
	pi++
	matchSlash := !pathname // without pathname, "*" is "**"
	if at(p, pi) == '*' {
		for at(p, pi) == '*' {
			pi++
		}
		// "**" crosses slashes only as a whole element: at the start or
		// after a "/", and at the end or before a "/" (or an escaped one).
		before := first == 0 || p[first-1] == '/'
		after := pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && at(p, pi+1) == '/')
		matchSlash = before && after
		// "a/**/b" matches "a/b" too: "**/" may match nothing at all.
		if matchSlash && at(p, pi) == '/' && wild(p[pi+1:], t[ti:], pathname) == matched {
			return matched, 0, 0, true
		}
	}
	if pi == len(p) {
		if !matchSlash && strings.IndexByte(t[ti:], '/') >= 0 {
			return noMatch, 0, 0, true
		}
		return matched, 0, 0, true
	}
	if !matchSlash && p[pi] == '/' {
		slash := strings.IndexByte(t[ti:], '/')
		if slash < 0 {
			return noMatch, 0, 0, true
		}
		return matched, pi, ti + slash, false
	}
	for ; at(t, ti) != 0; ti++ {
		tc := at(t, ti)
		if c := p[pi]; !isGlobSpecial(c) {
			// A literal after the star: skip to where the text has it.
			for tc != 0 && (matchSlash || tc != '/') && tc != c {
				ti++
				tc = at(t, ti)
			}
			if tc != c {
				if matchSlash {
					return abortAll, 0, 0, true
				}
				return abortToStarStar, 0, 0, true
			}
		}
		r := wild(p[pi:], t[ti:], pathname)
		if r != noMatch {
			if !matchSlash || r != abortToStarStar {
				return r, 0, 0, true
			}
		} else if !matchSlash && tc == '/' {
			return abortToStarStar, 0, 0, true
		}
	}
	return abortAll, 0, 0, true
}

// class matches the bracket expression at p[pi] ("[") against the byte
// c. It returns the index of the closing "]" and whether c is in the
// set (after "!" or "^" negates it), or abortAll for a set without its
// "]" or with an unknown "[:name:]". As in git, a "]" right after the
// "[" (or "[!") is a member, "\" makes the next byte literal, and a
// range's ends are bytes.
func class(p string, pi int, c byte) (end int, in bool, r outcome) {
	pi++
	pc := at(p, pi)
	negated := pc == '!' || pc == '^'
	if negated {
		pi++
		pc = at(p, pi)
	}
	var prev byte // the byte a following "-" starts a range from; 0 after a range or a class
	for {
		switch {
		case pc == 0:
			return 0, false, abortAll
		case pc == '\\':
			pi++
			if pc = at(p, pi); pc == 0 {
				return 0, false, abortAll
			}
			in = in || c == pc
		case pc == '-' && prev != 0 && at(p, pi+1) != 0 && at(p, pi+1) != ']':
			pi++
			if pc = at(p, pi); pc == '\\' {
				pi++
				if pc = at(p, pi); pc == 0 {
					return 0, false, abortAll
				}
			}
			in = in || (prev <= c && c <= pc)
			pc = 0
		case pc == '[' && at(p, pi+1) == ':':
			name, close, ok := className(p, pi)
			if close < 0 {
				return 0, false, abortAll
			}
			if !ok {
				// Not "[:name:]": the "[" is a plain member.
				in = in || c == '['
				break
			}
			m, known := inClass(name, c)
			if !known {
				return 0, false, abortAll
			}
			in, pi, pc = in || m, close, 0
		default:
			in = in || c == pc
		}
		prev = pc
		pi++
		if pc = at(p, pi); pc == ']' {
			return pi, in != negated, matched
		}
	}
}

// className reads "[:name:]" at p[pi]: the name, the index of the "]"
// that closes it, and whether it is one (a "]" not preceded by ":" is
// not). close is -1 when no "]" follows at all.
func className(p string, pi int) (name string, close int, ok bool) {
	start := pi + 2
	i := strings.IndexByte(p[start:], ']')
	if i < 0 {
		return "", -1, false
	}
	close = start + i
	if i < 1 || p[close-1] != ':' {
		return "", close, false
	}
	return p[start : close-1], close, true
}

// inClass reports whether c is in the POSIX class name, in the C locale
// as git's own ctype has it (no byte above 127 is in any class; space is
// " \t\n\r"), and whether name is a class at all.
func inClass(name string, c byte) (in, known bool) {
	lower, upper, digit := 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9'
	switch name {
	case "alnum":
		return lower || upper || digit, true
	case "alpha":
		return lower || upper, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return 0x21 <= c && c <= 0x7e, true
	case "lower":
		return lower, true
	case "print":
		return 0x20 <= c && c <= 0x7e, true
	case "punct":
		return 0x21 <= c && c <= 0x7e && !lower && !upper && !digit, true
	case "space":
		return c == ' ' || c == '\t' || c == '\n' || c == '\r', true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F'), true
	}
	return false, false
}
