package edit

import (
	"fmt"
	"strings"
)

// The patch format is the one OpenAI's Codex models write:
//
//	*** Begin Patch
//	*** Add File: path        then its lines, each after "+"
//	*** Delete File: path
//	*** Update File: path
//	*** Move to: new/path     (optional, right after Update File)
//	@@ [a line to find first] then the hunk's lines: " " kept, "-" removed, "+" added
//	*** End of File           (optional: the hunk is at the end of the file)
//	*** End Patch
//
// A patch may come inside a fenced block (```patch ... ```), and with
// "\r\n" line ends. An empty line within a hunk is an empty kept line,
// and the first hunk of a file may leave out its "@@".

// action is what a patch does to one file.
type action struct {
	kind   string // "add", "delete", "update" ("move" once moveTo is set)
	path   string // as written in the patch
	moveTo string
	add    []string // an added file's lines
	hunks  []hunk
}

// hunk is one "@@" section of an update.
type hunk struct {
	context string     // the text after "@@ ", found before old is
	lines   []hunkLine // in order
	eof     bool       // "*** End of File": old is at the end of the file
}

// hunkLine is a line of a hunk: ' ' kept, '-' removed or '+' added.
type hunkLine struct {
	kind byte
	text string
}

// old returns the hunk's kept and removed lines, which the file must hold.
func (h *hunk) old() []string {
	var ls []string
	for _, l := range h.lines {
		if l.kind != '+' {
			ls = append(ls, l.text)
		}
	}
	return ls
}

const (
	beginPatch = "*** Begin Patch"
	endPatch   = "*** End Patch"
	addFile    = "*** Add File: "
	deleteFile = "*** Delete File: "
	updateFile = "*** Update File: "
	moveTo     = "*** Move to: "
	endOfFile  = "*** End of File"
)

func parseError(n int, format string, args ...any) error {
	return fmt.Errorf("%w: patch line %d: %s", ErrInvalid, n, fmt.Sprintf(format, args...))
}

// parsePatch parses text into the actions it holds, in order.
func parsePatch(text string) ([]action, error) {
	lines := patchLines(text)
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != beginPatch {
		return nil, fmt.Errorf("%w: a patch starts with %q", ErrInvalid, beginPatch)
	}
	if strings.TrimSpace(lines[len(lines)-1]) != endPatch {
		return nil, fmt.Errorf("%w: a patch ends with %q", ErrInvalid, endPatch)
	}
	p := &parser{lines: lines[:len(lines)-1], n: 1}
	var acts []action
	for p.n < len(p.lines) {
		a, err := p.action()
		if err != nil {
			return nil, err
		}
		acts = append(acts, a)
	}
	if len(acts) == 0 {
		return nil, fmt.Errorf("%w: the patch changes no file", ErrInvalid)
	}
	return acts, nil
}

// patchLines splits text into lines, without "\r", inside its fence if
// it has one, without the blank lines around it.
func patchLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) >= 2 && strings.HasPrefix(lines[0], "```") && strings.TrimSpace(lines[len(lines)-1]) == "```" {
		lines = lines[1 : len(lines)-1]
	}
	return lines
}

type parser struct {
	lines []string
	n     int // the next line
}

func (p *parser) header() bool { return strings.HasPrefix(p.lines[p.n], "*** ") }

func (p *parser) action() (action, error) {
	l := p.lines[p.n]
	p.n++
	switch {
	case strings.HasPrefix(l, addFile):
		a := action{kind: "add", path: strings.TrimSpace(l[len(addFile):])}
		for p.n < len(p.lines) && !p.header() {
			if !strings.HasPrefix(p.lines[p.n], "+") {
				return a, parseError(p.n+1, "a line of an added file starts with \"+\"")
			}
			a.add = append(a.add, p.lines[p.n][1:])
			p.n++
		}
		return a, nil
	case strings.HasPrefix(l, deleteFile):
		return action{kind: "delete", path: strings.TrimSpace(l[len(deleteFile):])}, nil
	case strings.HasPrefix(l, updateFile):
		a := action{kind: "update", path: strings.TrimSpace(l[len(updateFile):])}
		if p.n < len(p.lines) && strings.HasPrefix(p.lines[p.n], moveTo) {
			a.moveTo = strings.TrimSpace(p.lines[p.n][len(moveTo):])
			p.n++
		}
		if err := p.hunks(&a); err != nil {
			return a, err
		}
		if len(a.hunks) == 0 && a.moveTo == "" {
			return a, parseError(p.n, "an update of %s with no hunk", a.path)
		}
		return a, nil
	}
	return action{}, parseError(p.n, "expected *** Add File:, *** Delete File: or *** Update File:, not %q", l)
}

// hunks reads the hunks of an update, up to the next file's header.
func (p *parser) hunks(a *action) error {
	var h *hunk
	for p.n < len(p.lines) {
		l := p.lines[p.n]
		if l == endOfFile || strings.TrimSpace(l) == endOfFile {
			if h == nil {
				return parseError(p.n+1, "%s before any hunk", endOfFile)
			}
			h.eof = true
			p.n++
			h = nil
			continue
		}
		if p.header() {
			return nil
		}
		p.n++
		if l == "@@" || strings.HasPrefix(l, "@@ ") {
			a.hunks = append(a.hunks, hunk{context: strings.TrimSpace(strings.TrimPrefix(l, "@@"))})
			h = &a.hunks[len(a.hunks)-1]
			continue
		}
		if h == nil { // the first hunk without its "@@"
			a.hunks = append(a.hunks, hunk{})
			h = &a.hunks[len(a.hunks)-1]
		}
		switch {
		case l == "":
			h.lines = append(h.lines, hunkLine{' ', ""})
		case l[0] == ' ' || l[0] == '-' || l[0] == '+':
			h.lines = append(h.lines, hunkLine{l[0], l[1:]})
		default:
			return parseError(p.n, "a hunk line starts with \" \", \"-\" or \"+\", not %q", l)
		}
	}
	return nil
}
