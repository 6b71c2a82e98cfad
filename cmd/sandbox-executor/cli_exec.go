package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const execDoc = `Runs CMD on the agent with sh -c, prints its stdout and stderr here as it
runs (each to its own), and exits with its exit code: 124 if -timeout
stopped it, 128+n if signal n ended it, 125 if it could not be run (no
agent, a refused token, a lost connection), 130 after Ctrl-C, which also
kills it. Several words are joined with spaces, as ssh does, so quote
what the remote shell must see whole: exec -- 'cd /app && make'. Standard
input is not sent, unless -i: then it is read to its end and sent as the
command's input before the command starts (text, at most 64 MiB: copy
binary data with cp and redirect it). Lines come as the agent reads them:
a line longer than 32 KiB arrives in pieces, each printed on a line of
its own.
`

// maxExecInput bounds what exec -i reads of standard input: the agent's
// default body limit.
const maxExecInput = 64 << 20

// exec runs "sandbox-executor exec": a command on the agent through
// /run_streaming, its output printed live.
func (c *cli) exec(ctx context.Context, args []string) error {
	fs := c.flagSet("exec", "[flags] [--] CMD [ARG...]", execDoc)
	cf := addConnFlags(fs.FlagSet)
	session := fs.String("session", "", "run CMD in this `session` of the agent, where cd and export last between commands; it is created if it does not exist")
	cwd := fs.String("cwd", "", "the command's working `directory` on the agent (default: the agent's own)")
	env := envFlag{}
	fs.Var(env, "env", "set `NAME=VALUE` in the command's environment; repeat for more")
	timeout := fs.String("timeout", "", "kill the command's process group after this `duration` (30s, 5m, or a number of seconds)")
	withInput := fs.Bool("i", false, "send standard input, read to its end, as the command's input (text, at most 64 MiB)")
	words, err := c.parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return c.usageError(fs, "no command given")
	}
	cmd := client.Command{Cmd: strings.Join(words, " "), Cwd: *cwd, Env: env, Session: *session}
	if *timeout != "" {
		if cmd.Timeout, err = parseTimeout(*timeout); err != nil {
			return c.usageError(fs, "invalid -timeout %q: want a positive duration such as 30s or 5m, or a number of seconds", *timeout)
		}
	}

	if *withInput {
		if cmd.Input, err = c.readInput(); err != nil {
			return err
		}
	}

	out := newLineOut(c.stdout, c.stderr)
	defer out.flush()
	cl, err := c.connect(cf, func() { out.flush() })
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	if cmd.Session != "" {
		if _, _, err := cl.CreateSession(ctx, client.SessionConfig{ID: cmd.Session, Reuse: true}); err != nil {
			return err
		}
	}
	for ev, err := range cl.RunStream(ctx, cmd) {
		if err != nil {
			out.flush()
			return err
		}
		if ev.Type == client.EventOutput {
			if out.line(ev.Stream, nil, ev.Data) != nil {
				return out.err // stdout was closed: the command is of no more use
			}
			continue
		}
		// complete
		if ev.Message != "" {
			out.note("%s", ev.Message)
		}
		if ev.Truncated {
			out.note("the agent dropped part of the output")
		}
		if err := out.flush(); err != nil {
			return err
		}
		if ev.Code != 0 {
			return exitCodeError{ev.Code}
		}
		return nil
	}
	return nil // not reached: the sequence ends with complete or an error
}

// readInput reads standard input for exec -i: text, since it travels as
// a JSON string, which would replace what is not UTF-8.
func (c *cli) readInput() (string, error) {
	in, err := io.ReadAll(io.LimitReader(c.stdin, maxExecInput+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("reading standard input: %w", err)
	case len(in) > maxExecInput:
		return "", fmt.Errorf("standard input is over %d MiB: copy it with cp and redirect it", maxExecInput>>20)
	case !utf8.Valid(in):
		return "", errors.New("standard input is not UTF-8 text, which -i sends: copy it with cp and redirect it")
	}
	return string(in), nil
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
