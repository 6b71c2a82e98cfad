package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const execDoc = `Runs a command on the agent, as docker exec and kubectl exec do, and exits
with its exit code: 124 if -timeout stopped it, 128+n if signal n ended it,
125 if it could not be run (no agent, a refused token, a refused request, a
lost connection), 130 after Ctrl-C, which also kills it.

  exec -- 'cd /app && make'     one word: a shell command, run with sh -c
  exec -- ls -la "/tmp/a file"  several words: the program and its arguments,
                                exactly, with no shell in between

Its stdout and stderr come here byte for byte, each to its own, as it
writes them (binary output, CRLF and a last line without a newline
included). Standard input is not sent, unless -i: then it streams as it
comes (a pipe, a file, a terminal) and its end closes the command's.
-t runs the command on a terminal of the agent, sized as this one and
following its size; -it also puts this terminal in raw mode meanwhile
(restored however exec ends), so that every key, Ctrl-C included, goes to
the command. -it with no command is an interactive login shell, as shell.
`

// exec runs "sandbox-executor exec": a command on the agent over
// /exec_ws, its output copied here as it comes.
func (c *cli) exec(ctx context.Context, args []string) error {
	fs := c.flagSet("exec", "[flags] [--] CMD [ARG...]", execDoc)
	cf := addConnFlags(fs.FlagSet)
	o := addExecFlags(fs)
	withInput := fs.Bool("i", false, "stream standard input to the command; its end closes the command's")
	tty := fs.Bool("t", false, "run the command on a terminal (interactive programs, colours); with -i, this terminal is in raw mode meanwhile")
	words, err := c.parse(fs, splitShortFlags(args), false)
	if err != nil {
		return err
	}
	opts, err := o.options(c, fs)
	if err != nil {
		return err
	}
	opts.TTY, opts.Stdin = *tty, *withInput
	switch {
	case len(words) == 1:
		opts.Cmd = words[0]
	case len(words) > 1:
		opts.Argv = words
	case !*tty || !*withInput:
		return c.usageError(fs, "no command given (only -it runs the login shell)")
	}
	return c.runExec(ctx, cf, opts)
}

const shellDoc = `Runs an interactive login shell on the agent, on a terminal sized as this
one, with this terminal in raw mode until it exits (as exec -it with no
command). With -session, the session's user's shell, in its directory and
environment. Exits with the shell's exit code.
`

// shell runs "sandbox-executor shell": exec -it of the login shell.
func (c *cli) shell(ctx context.Context, args []string) error {
	fs := c.flagSet("shell", "[flags]", shellDoc)
	cf := addConnFlags(fs.FlagSet)
	o := addExecFlags(fs)
	words, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(words) > 0 {
		return c.usageError(fs, "shell takes no arguments; run a command with exec -it -- CMD")
	}
	opts, err := o.options(c, fs)
	if err != nil {
		return err
	}
	opts.TTY, opts.Stdin = true, true
	return c.runExec(ctx, cf, opts)
}

// splitShortFlags returns args with -it and -ti written as -i -t, as
// docker exec users type them; the flag package knows no combined flags.
// It stops where the flags stop: at "--", or at the first word that is
// neither a flag nor the value of one.
func splitShortFlags(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return append(out, args[i:]...)
		}
		switch name := strings.TrimLeft(a, "-"); {
		case a == "-it" || a == "-ti":
			out = append(out, "-i", "-t")
		case isExecValueFlag(name) && i+1 < len(args):
			out = append(out, a, args[i+1]) // its value, whatever it looks like
			i++
		default:
			out = append(out, a)
		}
	}
	return out
}

// isExecValueFlag reports whether exec's flag name takes a value, which
// may be the next word.
func isExecValueFlag(name string) bool {
	switch name {
	case "session", "cwd", "user", "env", "timeout", "url", "token":
		return true
	}
	return false
}

// execFlags are the flags exec and shell share.
type execFlags struct {
	session, cwd, user, timeout *string
	env                         envFlag
}

func addExecFlags(fs *cmdFlags) *execFlags {
	o := &execFlags{env: envFlag{}}
	o.session = fs.String("session", "", "run in this `session` of the agent, where cd and export last between commands; it is created if it does not exist")
	o.cwd = fs.String("cwd", "", "the command's working `directory` on the agent (default: the agent's own, or the session's)")
	o.user = fs.String("user", "", "run as this `user` (a name or a uid; the agent must run as root)")
	fs.Var(o.env, "env", "set `NAME=VALUE` in the command's environment; repeat for more")
	o.timeout = fs.String("timeout", "", "kill the command's process group after this `duration` (30s, 5m, or a number of seconds)")
	return o
}

// options returns the ExecOptions the flags say.
func (o *execFlags) options(c *cli, fs *cmdFlags) (client.ExecOptions, error) {
	opts := client.ExecOptions{Cwd: *o.cwd, Env: o.env, Session: *o.session, User: *o.user}
	if *o.timeout != "" {
		var err error
		if opts.Timeout, err = parseTimeout(*o.timeout); err != nil {
			return opts, c.usageError(fs, "invalid -timeout %q: want a positive duration such as 30s or 5m, or a number of seconds", *o.timeout)
		}
	}
	return opts, nil
}

// runExec runs opts on the agent cf names and copies its output here; see
// execDoc. Its error is an exitCodeError with the command's code, or what
// went wrong (125).
func (c *cli) runExec(ctx context.Context, cf *connFlags, opts client.ExecOptions) error {
	cl, err := c.connect(cf, nil)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	if opts.Session != "" {
		if _, _, err := cl.CreateSession(ctx, client.SessionConfig{ID: opts.Session, Reuse: true}); err != nil {
			return err
		}
	}
	local := c.localTerminal(opts.TTY)
	if local != nil {
		opts.Cols, opts.Rows = local.size()
	}
	// Stdin goes on a side channel the agent splices, when it offers one;
	// keystrokes are small, so a TTY keeps channel 0.
	opts.StdinRaw = opts.Stdin && !opts.TTY
	x, err := cl.Exec(ctx, opts)
	if err != nil {
		return execError(err)
	}
	defer x.Close() // before the exit, this kills the command
	if local != nil && opts.Stdin {
		restore, err := local.makeRaw()
		if err != nil {
			return err
		}
		defer restore() // on every way out, a panic's included
	}
	if local != nil {
		stop := local.followSize(ctx, x)
		defer stop()
	}
	if opts.Stdin {
		// sendStdin is not waited for: a read of a terminal or a pipe
		// cannot be interrupted, and the process exits once exec returns.
		// It ends by itself at the input's end or when the connection
		// closes.
		go sendStdin(context.WithoutCancel(ctx), x, c.stdin, c.stderr)
	}
	return c.copyOutput(ctx, x, opts.Timeout)
}

// execError makes a failed connection read as "cannot reach the agent".
func execError(err error) error {
	var ce *client.ConnError
	var op *net.OpError
	if errors.As(err, &ce) && errors.As(ce.Err, &op) {
		return &client.ConnError{URL: ce.URL, Err: op}
	}
	return err
}

// copyOutput writes the command's stdout and stderr here as they come,
// and returns its exit.
func (c *cli) copyOutput(ctx context.Context, x *client.ExecConn, timeout time.Duration) error {
	for {
		ev, err := x.Read(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil // not reached: the exit comes first
		case err != nil:
			if ctx.Err() != nil {
				return exitCodeError{exitInterrupted} // Ctrl-C: closing the connection kills the command
			}
			return fmt.Errorf("the connection to the agent broke: %w", err)
		case ev.Exit != nil:
			if ev.Exit.Termination.Reason == "timeout" {
				fmt.Fprintf(c.stderr, "sandbox-executor: command timed out after %s\n", timeout)
			}
			if ev.Exit.Code != 0 {
				return exitCodeError{ev.Exit.Code}
			}
			return nil
		}
		w := c.stdout
		if ev.Stream == client.Stderr {
			w = c.stderr
		}
		if _, err := w.Write(ev.Data); err != nil {
			return err // stdout was closed: the command is of no more use
		}
	}
}

// execStdinChunk is how much of standard input one frame carries.
const execStdinChunk = 256 << 10

// sendStdin sends what r gives to the command's stdin as it comes, then
// closes it at r's end: through the side channel if the agent offered
// one, else (or if the side request failed before taking any of r) as
// channel-0 frames. A side request that failed later has closed the
// command's stdin: that is said on stderr. It runs in its own goroutine;
// it ends at r's end or error, or once the connection is closed (which
// ends the command, and so the side request).
func sendStdin(ctx context.Context, x *client.ExecConn, r io.Reader, stderr io.Writer) {
	if x.StdinID() != "" {
		growPipe(r)
		_, err := x.SendStdin(ctx, r)
		if err == nil {
			return
		}
		if !errors.Is(err, client.ErrStdinUnsent) {
			fmt.Fprintf(stderr, "sandbox-executor: stdin cut short: %v\n", err)
			return
		}
	}
	buf := make([]byte, execStdinChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 && x.WriteStdin(ctx, buf[:n]) != nil {
			return
		}
		if err != nil {
			_ = x.CloseStdin(ctx)
			return
		}
	}
}

// parseTimeout reads a positive duration, written as Go writes one (30s,
// 1m30s) or as a number of seconds.
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, err
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("not positive: %s", s)
	}
	return d, nil
}

// envFlag collects repeated -env NAME=VALUE flags.
type envFlag map[string]string

func (e envFlag) String() string { return "" }

func (e envFlag) Set(kv string) error {
	name, value, ok := strings.Cut(kv, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", kv)
	}
	e[name] = value
	return nil
}

// stdinPipeSize is the capacity asked for a standard input that is a
// pipe: the side channel sends what one read gives, so that a fast writer
// fills chunks of up to a megabyte (the default maximum of an
// unprivileged pipe).
const stdinPipeSize = 1 << 20

// growPipe sets r's pipe to stdinPipeSize, if r is a pipe and the system
// allows it; if not, nothing changes.
func growPipe(r io.Reader) {
	f, ok := r.(*os.File)
	if !ok {
		return
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdinPipeSize) })
	}
}
