package executor

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Check returns the error Start and Run would return for c before
// starting anything: one wrapping ErrInvalidCommand or ErrInvalidDir.
// Callers that must answer before they start call it themselves.
func Check(c Command) error {
	if err := c.check(); err != nil {
		return err
	}
	return checkDir(c.Dir)
}

// maxArgStrlen is the kernel's limit on one argument or environment entry,
// counting its NUL: MAX_ARG_STRLEN, 32 pages.
var maxArgStrlen = 32 * os.Getpagesize()

// check returns an error wrapping ErrInvalidCommand if c cannot be passed
// to execve(2), which would refuse it with a bare "invalid argument" or
// "argument list too long".
func (c Command) check() error {
	if err := c.checkArgv(); err != nil {
		return err
	}
	if strings.IndexByte(c.Cmd, 0) >= 0 {
		return fmt.Errorf("%w: cmd contains a NUL byte", ErrInvalidCommand)
	}
	if len(c.Cmd) >= maxArgStrlen {
		return fmt.Errorf("%w: cmd is %d bytes, over the kernel's limit of %d bytes for one argument",
			ErrInvalidCommand, len(c.Cmd), maxArgStrlen-1)
	}
	for k, v := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: environment variable name %q", ErrInvalidCommand, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: environment variable %s contains a NUL byte", ErrInvalidCommand, k)
		}
		if n := len(k) + 1 + len(v); n >= maxArgStrlen {
			return fmt.Errorf("%w: environment variable %s is %d bytes as NAME=value, over the kernel's limit of %d bytes for one entry",
				ErrInvalidCommand, k, n, maxArgStrlen-1)
		}
	}
	return nil
}

// dirError is an error wrapping ErrInvalidDir whose text names the
// directory and what is wrong with it.
type dirError struct {
	dir, problem string
}

func (e *dirError) Error() string { return "cwd " + e.problem + ": " + e.dir }

func (e *dirError) Unwrap() error { return ErrInvalidDir }

// checkDir returns an error wrapping ErrInvalidDir, naming dir, unless dir
// is empty or a directory the agent may enter.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if errors.Is(err, os.ErrPermission) {
			return &dirError{dir, "is not accessible (permission denied)"}
		}
		return &dirError{dir, "is not a directory"}
	}
	// The child's chdir needs search permission. Root passes whatever the
	// mode says.
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.X_OK, unix.AT_EACCESS); errors.Is(err, unix.EACCES) {
		return &dirError{dir, "is not accessible (permission denied)"}
	}
	return nil
}

// startError turns the error of a start that failed into one wrapping
// ErrInvalidCommand, ErrInvalidDir or ErrBusy when the request or the
// load, not the system, is at fault.
func startError(c Command, err error) error {
	switch {
	case errors.Is(err, syscall.E2BIG):
		return fmt.Errorf("%w: cmd and env together are over the kernel's limit on a new process's arguments and environment (E2BIG)",
			ErrInvalidCommand)
	case errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("%w: the system refused a new process (%v)", ErrBusy, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		// The child's chdir and the shell's execve fail alike, naming the
		// shell: if the directory fails the check now, it was the chdir
		// (it changed since Check); otherwise the shell is at fault.
		if dirErr := checkDir(c.Dir); dirErr != nil {
			return dirErr
		}
		// checkDir asks as the agent; the chdir was the user's.
		if c.User != nil && c.Dir != "" && errors.Is(err, syscall.EACCES) {
			return &dirError{c.Dir, "is not accessible to user " + c.User.Name + " (permission denied)"}
		}
	}
	return err
}
