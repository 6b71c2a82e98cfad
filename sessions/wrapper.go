package sessions

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

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
// `source .venv/bin/activate` works as in bash; see sourceSupport.
//
// The trap keeps the exit status (POSIX: an EXIT trap does not change it
// unless it calls exit). It writes nothing to the command's own output:
// everything goes to the state file, errors to /dev/null, and xtrace's
// lines (set -x) follow stderr there too. Its commands are protected from
// what cmd may have defined: \ stops aliases, unset -f drops functions
// (export and unset are special builtins, which functions cannot
// replace), >| passes noclobber. A shell killed by a signal runs no EXIT
// trap and leaves the file empty.
func wrap(cmd, statePath string, source sourceSupport) string {
	trap := `{ \unset -f pwd echo; \export -p; \echo ` + markPwd + `; \pwd; \echo ` + markEnd + `; } >|` +
		shellQuote(statePath) + ` 2>/dev/null`
	return source.prefix() + `trap ` + shellQuote(trap) + ` EXIT; ` + cmd
}

// sourceSupport is whether the shell has `source`, which dash lacks.
type sourceSupport int

const (
	sourceUnknown sourceSupport = iota
	sourceBuiltin               // bash, busybox ash: nothing to define
	sourceMissing               // dash: source is defined as a function
)

// prefix returns what defines source, if the shell needs it. Not knowing,
// the shell asks itself; that costs each command a search of PATH (75 µs
// with 15 directories), so the Registry asks the shell once (see
// Registry.source).
func (s sourceSupport) prefix() string {
	switch s {
	case sourceBuiltin:
		return ""
	case sourceMissing:
		return `source() { . "$1"; }; `
	}
	// eval, so that a shell that has source (busybox ash, which refuses a
	// function of that name even in a branch never taken) parses no
	// definition.
	return `command -v source >/dev/null || eval 'source() { . "$1"; }'; `
}

// shellQuote quotes s as one shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// makeStateDir makes the directory of the state files under parent, or
// under the first of stateParents that takes it if parent is empty.
// Commands running as another user write their own file in it: they may
// reach it by name (mode 0711) but not list it or create in it.
func makeStateDir(parent string) (string, error) {
	parents := []string{parent}
	if parent == "" {
		parents = append(stateParents(), os.TempDir())
	}
	var err error
	for _, p := range parents {
		var dir string
		if dir, err = os.MkdirTemp(p, "sandbox-executor-state-"); err != nil {
			continue
		}
		if err = os.Chmod(dir, 0o711); err != nil {
			os.Remove(dir)
			continue
		}
		return dir, nil
	}
	return "", err
}

// stateParents returns the tmpfs mounts among /dev/shm and /run. A state
// file is written and removed by every session command: on a disk file
// system (ext4) that costs a journal commit, a millisecond, as much as
// the whole command; on a tmpfs, a few microseconds.
func stateParents() []string {
	var tmpfs []string
	for _, p := range []string{"/dev/shm", "/run"} {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) == nil && st.Type == unix.TMPFS_MAGIC {
			tmpfs = append(tmpfs, p)
		}
	}
	return tmpfs
}
