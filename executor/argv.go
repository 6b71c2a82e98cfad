package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ShellQuote returns argv as one shell command that runs exactly those
// words: each is single-quoted, a single quote inside one written as '\”.
// A session runs an argv this way, through its shell, so that what the
// command changes (cwd, env) is still kept.
func ShellQuote(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// String returns the command as a shell would read it: Cmd, or Argv
// quoted (see ShellQuote). Process lists and logs show it.
func (c Command) String() string {
	if c.Argv != nil {
		return ShellQuote(c.Argv)
	}
	return c.Cmd
}

// checkArgv returns an error wrapping ErrInvalidCommand unless c has
// exactly one of Cmd and Argv, and Argv, if set, is a program and
// arguments execve(2) accepts.
func (c Command) checkArgv() error {
	if c.Argv == nil {
		return nil
	}
	if c.Cmd != "" {
		return fmt.Errorf("%w: give cmd or argv, not both", ErrInvalidCommand)
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return fmt.Errorf("%w: argv must be a non-empty array whose first word names a program", ErrInvalidCommand)
	}
	for _, a := range c.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: an argv word contains a NUL byte", ErrInvalidCommand)
		}
		if len(a) >= maxArgStrlen {
			return fmt.Errorf("%w: an argv word is %d bytes, over the kernel's limit of %d bytes for one argument",
				ErrInvalidCommand, len(a), maxArgStrlen-1)
		}
	}
	return nil
}

// program returns the path and arguments to start c with: Argv[0] looked
// up in the PATH of env (the command's own environment, not the agent's),
// and Argv itself. If no executable is found there, or if viaShell, it
// returns the shell with `exec "$0" "$@"` in front of Argv instead: the
// shell then fails as it would for that command line, with its own
// message on stderr and status 127 (not found) or 126 (not executable),
// so the caller sees the command's own failure rather than an error from
// the agent.
func (r *Runner) program(c Command, env []string, viaShell bool) (path string, args []string) {
	if c.Argv == nil {
		return r.shell(), []string{r.shell(), "-c", c.Cmd}
	}
	if p, ok := lookPath(c.Argv[0], envValue(env, "PATH"), c.Dir); ok && !viaShell {
		return p, c.Argv
	}
	return r.shell(), append([]string{r.shell(), "-c", `exec "$0" "$@"`}, c.Argv...)
}

// isExecError reports whether err, from starting an Argv, is execve's
// refusal of the program rather than a fault of the request's directory or
// of the system's: the shell would report it as the command's failure.
func isExecError(err error) bool {
	if errors.Is(err, ErrInvalidDir) {
		return false
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.ENOTDIR)
}

// lookPath finds name as a shell would: as given if it holds a slash
// (relative to dir), else in each directory of path in turn. An empty
// entry of path is the working directory.
func lookPath(name, path, dir string) (string, bool) {
	if strings.Contains(name, "/") {
		return name, isExecutable(name, dir)
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if isExecutable(p, dir) {
			if !strings.Contains(p, "/") {
				p = "./" + p // filepath.Join dropped it; a bare name would be looked up again
			}
			return p, true
		}
	}
	return "", false
}

// isExecutable reports whether p (relative to dir) is a regular file the
// agent may execute.
func isExecutable(p, dir string) bool {
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return false
	}
	return unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS) == nil
}

// envValue returns the value of the last key= entry of env, as exec and
// the kernel's consumers read duplicates, or "" if there is none.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
