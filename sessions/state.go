package sessions

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The state file a session command's shell writes when it exits (see
// wrapper): the shell's `export -p`, then a line markPwd, then `pwd`'s
// output, then a line markEnd. The markers are recognised only where a
// new declaration would start, so no value can fake them; markEnd last
// shows that the whole state was written.
const (
	markPwd = "@pwd"
	markEnd = "@end"
)

// dropped are exported variables a session does not keep: each shell sets
// them afresh (bash's and busybox's SHLVL, bash's _).
var dropped = map[string]bool{"SHLVL": true, "_": true}

// parseState parses a state file and returns the working directory and
// the exported environment ("NAME=value" entries) it holds. ok is false if
// the file is not a whole state: a command that exec'd away, replaced the
// EXIT trap, or was killed leaves it empty or cut.
//
// It reads `export -p` as dash, busybox ash and bash (in POSIX mode or
// not) print it: `export NAME='value'` or `declare -x NAME="value"`, with
// values quoted in single quotes (a quote itself written as '"'"', or as
// a backslash and a quote between two quoted parts), double
// quotes with backslash escapes, or bash's $'...' with C escapes, and
// possibly spanning lines; `export NAME` without a value is a variable
// that is exported but not set, which no child sees, so it is skipped.
func parseState(b []byte) (cwd string, env []string, ok bool) {
	p := exportParser{b: b}
	for {
		if p.line(markPwd) {
			break
		}
		entry, set, ok := p.declaration()
		if !ok {
			return "", nil, false
		}
		if set && !dropped[string(entry[:bytes.IndexByte(entry, '=')])] {
			env = append(env, string(entry))
		}
	}
	rest := p.b[p.i:]
	pwd, found := bytes.CutSuffix(rest, []byte("\n"+markEnd+"\n"))
	if !found || len(pwd) == 0 || pwd[0] != '/' {
		return "", nil, false
	}
	return string(pwd), env, true
}

// exportParser reads `export -p` output from b, from i on.
type exportParser struct {
	b     []byte
	i     int
	entry []byte // "NAME=value" of the last declaration, reused
}

// line reports whether the next line is exactly text, and if so moves
// past it.
func (p *exportParser) line(text string) bool {
	rest := p.b[p.i:]
	if len(rest) > len(text) && string(rest[:len(text)]) == text && rest[len(text)] == '\n' {
		p.i += len(text) + 1
		return true
	}
	return false
}

// declaration reads one `export NAME[=WORD]` or `declare -FLAGS
// NAME[=WORD]` line, and returns it as NAME=value, valid until the next
// call. set is false for a variable without a value; ok is false for
// anything else.
func (p *exportParser) declaration() (entry []byte, set, ok bool) {
	rest := p.b[p.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("export ")):
		p.i += len("export ")
	case bytes.HasPrefix(rest, []byte("declare -")):
		n := len("declare -")
		end := bytes.IndexByte(rest[n:], ' ')
		if end < 0 {
			return nil, false, false
		}
		flags := string(rest[n : n+end])
		p.i += n + end + 1
		// Only exported scalars reach a child's environment.
		if !strings.Contains(flags, "x") || strings.ContainsAny(flags, "aA") {
			_, _, ok := p.rest()
			return nil, false, ok
		}
	default:
		return nil, false, false
	}
	return p.rest()
}

// rest reads NAME[=WORD] and the newline that ends the declaration.
func (p *exportParser) rest() (entry []byte, set, ok bool) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != '=' && p.b[p.i] != '\n' {
		p.i++
	}
	name := p.b[start:p.i]
	if p.i == len(p.b) || !validName(name) {
		return nil, false, false
	}
	if p.b[p.i] == '\n' {
		p.i++
		return nil, false, true
	}
	p.i++ // '='
	p.entry = append(append(p.entry[:0], name...), '=')
	if p.entry, ok = p.word(p.entry); !ok || p.i == len(p.b) || p.b[p.i] != '\n' {
		return nil, false, false
	}
	p.i++
	return p.entry, true, true
}

// validName reports whether name can be a shell variable's.
func validName(name []byte) bool {
	if len(name) == 0 || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// word appends to out the shell word at p.i, up to an unquoted newline or
// blank, without its quotes.
func (p *exportParser) word(out []byte) ([]byte, bool) {
	b := p.b
	for p.i < len(b) {
		switch c := b[p.i]; {
		case c == '\n' || c == ' ' || c == '\t':
			return out, true
		case c == '\'':
			end := bytes.IndexByte(b[p.i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			out = append(out, b[p.i+1:p.i+1+end]...)
			p.i += end + 2
		case c == '"':
			var ok bool
			if out, ok = p.doubleQuoted(out); !ok {
				return nil, false
			}
		case c == '$' && p.i+1 < len(b) && b[p.i+1] == '\'':
			var ok bool
			if out, ok = p.cQuoted(out); !ok {
				return nil, false
			}
		case c == '\\':
			if p.i+1 == len(b) {
				return nil, false
			}
			if b[p.i+1] != '\n' { // a backslash-newline joins lines
				out = append(out, b[p.i+1])
			}
			p.i += 2
		default:
			out = append(out, c)
			p.i++
		}
	}
	return out, true
}

// doubleQuoted appends the text of the "..." at p.i to out. Inside, a
// backslash escapes only $ ` " \ and newline.
func (p *exportParser) doubleQuoted(out []byte) ([]byte, bool) {
	b := p.b
	for p.i++; p.i < len(b); p.i++ {
		switch c := b[p.i]; c {
		case '"':
			p.i++
			return out, true
		case '\\':
			if p.i+1 < len(b) && strings.IndexByte("$`\"\\\n", b[p.i+1]) >= 0 {
				p.i++
				if b[p.i] != '\n' {
					out = append(out, b[p.i])
				}
				continue
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return nil, false
}

// cQuoted appends the text of the $'...' at p.i to out, decoding the
// escapes bash writes there.
func (p *exportParser) cQuoted(out []byte) ([]byte, bool) {
	b := p.b
	for p.i += 2; p.i < len(b); {
		c := b[p.i]
		if c == '\'' {
			p.i++
			return out, true
		}
		if c != '\\' || p.i+1 == len(b) {
			out = append(out, c)
			p.i++
			continue
		}
		p.i++
		e := b[p.i]
		p.i++
		if simple, found := cEscapes[e]; found {
			out = append(out, simple)
			continue
		}
		switch {
		case e >= '0' && e <= '7':
			p.i--
			out = append(out, byte(p.number(8, 3)))
		case e == 'x':
			out = append(out, byte(p.number(16, 2)))
		case e == 'u' || e == 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			out = utf8.AppendRune(out, rune(p.number(16, n)))
		case e == 'c' && p.i < len(b):
			out = append(out, b[p.i]&0x1f)
			p.i++
		default: // not an escape: kept as written
			out = append(out, '\\', e)
		}
	}
	return nil, false
}

// cEscapes are the one-letter escapes of $'...'.
var cEscapes = map[byte]byte{
	'a': '\a', 'b': '\b', 'e': 0x1b, 'E': 0x1b, 'f': '\f', 'n': '\n', 'r': '\r',
	't': '\t', 'v': '\v', '\\': '\\', '\'': '\'', '"': '"', '?': '?',
}

// number reads up to max digits of base at p.i.
func (p *exportParser) number(base, max int) uint64 {
	start := p.i
	for p.i < len(p.b) && p.i-start < max && isDigit(p.b[p.i], base) {
		p.i++
	}
	n, _ := strconv.ParseUint(string(p.b[start:p.i]), base, 64)
	return n
}

func isDigit(c byte, base int) bool {
	switch {
	case c >= '0' && c <= '7':
		return true
	case base == 8:
		return false
	case c >= '8' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		return true
	}
	return false
}
