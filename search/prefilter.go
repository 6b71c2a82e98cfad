package search

import (
	"regexp/syntax"
)

// A prefilter lets the Go engine skip to the lines that can match: when
// every match of a regular expression must hold one of a few literals,
// the scan looks for those (fast) and runs the expression (slow, in Go)
// only on the lines that hold one.

// maxRequired bounds the literals a prefilter looks for at once.
const maxRequired = 8

// prefilter finds the next place where one of its literals is.
type prefilter struct {
	lits []*literal
	next []int // per literal: its next offset found, or -1 for none left; valid from `from` on
	from int
}

// newPrefilter returns the prefilter of the expression p, or nil if it
// has none worth using.
func newPrefilter(p string) *prefilter {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil
	}
	set := required(re.Simplify())
	if len(set) == 0 || len(set) > maxRequired {
		return nil
	}
	pf := &prefilter{}
	for _, s := range set {
		if len(s) < 2 {
			return nil // a single byte filters little
		}
		pf.lits = append(pf.lits, newLiteral([]byte(s)))
	}
	return pf
}

// required returns literals one of which every match of re holds, or
// nil if it cannot tell.
func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []string
		for _, s := range re.Sub {
			if r := required(s); r != nil && (best == nil || shortest(r) > shortest(best)) {
				best = r
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, s := range re.Sub {
			r := required(s)
			if r == nil {
				return nil
			}
			all = append(all, r...)
		}
		return all
	}
	return nil
}

func shortest(ss []string) int {
	n := -1
	for _, s := range ss {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

// reset starts the prefilter on new data.
func (pf *prefilter) reset() {
	pf.next = pf.next[:0]
	for range pf.lits {
		pf.next = append(pf.next, -2) // not looked for yet
	}
	pf.from = 0
}

// index returns the first offset, from pos on, where one of the
// literals starts, or -1. Calls on the same data must not go back.
func (pf *prefilter) index(data []byte, pos int) int {
	best := -1
	for i, l := range pf.lits {
		n := pf.next[i]
		if n == -2 || (n >= 0 && n < pos) {
			n = -1
			if j := l.index(data[pos:]); j >= 0 {
				n = pos + j
			}
			pf.next[i] = n
		}
		if n >= 0 && (best < 0 || n < best) {
			best = n
		}
	}
	return best
}
