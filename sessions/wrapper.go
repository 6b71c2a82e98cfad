package sessions

import (
	"errors"
	"io"
	"os"
	"strings"
)

// maxState bounds the state file the agent reads, and so a session's
// environment: a state over it is not committed. The kernel refuses a
// command whose arguments and environment pass a quarter of the stack
// limit (2 MiB by default), so a larger environment could start nothing.
const maxState = 1 << 20

// wrap returns cmd as the shell of a session command runs it: cmd itself,
// on the first line after a prefix that sets the EXIT trap which writes
// the shell's state to statePath (see parseState). The state is restored
// before the shell starts (its directory and whole environment are given
// to the process), so the prefix holds no state.
//
// The prefix stays on cmd's first line, so that the shell's messages give
// the line numbers they would give without it. cmd is not run through
// eval, whose errors dash prefixes with "eval: ": the shell parses and
// runs it as its own -c text, and its stdout, stderr and exit code are
// what they would be without a session. Where the shell lacks `source`
// (dash), the prefix defines it as a function calling `.`, so that
// `source .venv/bin/activate` works as in bash.
//
// The trap keeps the exit status (POSIX: an EXIT trap does not change it
// unless it calls exit). It writes nothing to the command's own output:
// everything goes to the state file, errors to /dev/null, and xtrace's
// lines (set -x) follow stderr there too. Its commands are protected from
// what cmd may have defined: \ stops aliases, unset -f drops functions
// (export and unset are special builtins, which functions cannot
// replace), >| passes noclobber. A shell killed by a signal runs no EXIT
// trap and leaves the file empty.
func wrap(cmd, statePath string) string {
	trap := `{ \unset -f pwd echo; \export -p; \echo ` + markPwd + `; \pwd; \echo ` + markEnd + `; } >|` +
		shellQuote(statePath) + ` 2>/dev/null`
	// eval, so that a shell that has source (busybox ash, which refuses a
	// function of that name even in a branch never taken) parses no
	// definition.
	return `command -v source >/dev/null || eval 'source() { . "$1"; }'; trap ` + shellQuote(trap) + ` EXIT; ` + cmd
}

// shellQuote quotes s as one shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// errStateTooLarge is readState's error for a state over maxState.
var errStateTooLarge = errors.New("session state too large")

// readState reads the state file at path, at most maxState bytes.
func readState(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxState+1))
	if err == nil && len(b) > maxState {
		err = errStateTooLarge
	}
	return b, err
}
