package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// The client subcommands drive an agent from outside, through package
// client: the same binary is the agent and its command-line client.

const (
	// exitFailed is exec's exit code when the command could not be run
	// (no agent, a refused token, a cut stream), as docker exec uses it,
	// so that a script can tell it from the command's own failures.
	exitFailed = 125
	// exitInterrupted is the exit code after Ctrl-C (or SIGTERM), as a
	// shell reports a command that SIGINT ended.
	exitInterrupted = 130
)

// isCLICommand reports whether name, the first argument, is a client
// subcommand (or install, which copies the binary, or help and version)
// rather than one of the agent's flags.
func isCLICommand(name string) bool {
	switch name {
	case "exec", "logs", "cp", "tunnel", "wait-port", "install", "help", "version", "mcp",
		"shell", "ps", "start", "kill":
		return true
	}
	return false
}

// cli runs one client subcommand with the seams of options.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// runCLI runs the client subcommand args[0] with the rest of args. Its
// errors are printed here, prefixed with the subcommand, and become an
// exitCodeError, so that main prints nothing more.
func (o options) runCLI(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	c := &cli{stdin: o.in(), stdout: o.out(), stderr: stderr, getenv: getenv}
	name, failCode := args[0], 1
	var err error
	switch name {
	case "exec":
		err, failCode = c.exec(ctx, args[1:]), exitFailed
	case "shell":
		err, failCode = c.shell(ctx, args[1:]), exitFailed
	case "ps":
		err = c.ps(ctx, args[1:])
	case "start":
		err = c.start(ctx, args[1:])
	case "kill":
		err = c.kill(ctx, args[1:])
	case "logs":
		err = c.logs(ctx, args[1:])
	case "cp":
		err = c.cp(ctx, args[1:])
	case "tunnel":
		err = c.tunnel(ctx, args[1:])
	case "wait-port":
		err = c.waitPort(ctx, args[1:])
	case "install":
		err = c.install(args[1:])
	case "mcp":
		err = c.mcp(ctx, args[1:])
	case "help":
		err = o.help(ctx, c, args[1:])
	case "version":
		_, err = fmt.Fprintln(c.stdout, "sandbox-executor", version)
	}
	var exit exitCodeError
	switch {
	case err == nil, errors.As(err, &exit):
		return err
	case ctx.Err() != nil:
		return exitCodeError{exitInterrupted}
	}
	fmt.Fprintf(stderr, "sandbox-executor %s: %v\n", name, explain(err))
	return exitCodeError{failCode}
}

// help runs "sandbox-executor help [COMMAND]": the agent's usage and
// flags, or COMMAND's help, on stdout.
func (o options) help(ctx context.Context, c *cli, args []string) error {
	switch {
	case len(args) == 0:
		_, err := parseConfig([]string{"-h"}, c.getenv, c.stdout) // prints the usage; exit code 0
		return err
	case len(args) == 1 && isCLICommand(args[0]) && args[0] != "help" && args[0] != "version":
		return o.runCLI(ctx, []string{args[0], "-h"}, c.getenv, c.stderr)
	}
	fmt.Fprintf(c.stderr, "sandbox-executor help: no command %q\nusage: sandbox-executor help [exec|shell|ps|start|kill|logs|cp|tunnel|wait-port|install|mcp]\n",
		strings.Join(args, " "))
	return exitCodeError{2}
}

// isHelpFlag reports whether arg, the agent's only argument, asks for
// help: it is then "help", whose output goes to stdout.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

func (o options) in() io.Reader {
	if o.stdin == nil {
		return os.Stdin
	}
	return o.stdin
}

// explain turns a refused token into advice; other errors already read
// well (a *client.ConnError says "cannot reach the agent at U: ...").
func explain(err error) error {
	var ae *client.Error
	if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized {
		return errors.New("the agent refused the token (401): set SANDBOX_SECRET (or -token) to the agent's secret")
	}
	return err
}

// cmdFlags is the flag set of a subcommand, with what its help says.
type cmdFlags struct {
	*flag.FlagSet
	name, usage, doc string
}

// flagSet returns the flag set of a subcommand, whose -h prints usage (the
// arguments after the flags) and doc, then the flags, on stdout.
func (c *cli) flagSet(name, usage, doc string) *cmdFlags {
	fs := flag.NewFlagSet("sandbox-executor "+name, flag.ContinueOnError)
	// The flag package would print its errors, then the whole help, on
	// its output; parse prints them instead, as usageError does.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, name: name, usage: usage, doc: doc}
}

// printHelp prints the subcommand's help on stdout.
func (c *cli) printHelp(fs *cmdFlags) {
	fmt.Fprintf(c.stdout, "usage: sandbox-executor %s %s\n\n%s\nflags:\n", fs.name, fs.usage, fs.doc)
	fs.SetOutput(c.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageError reports a wrong use of a subcommand on one line: what is
// wrong, the usage, and where the help is; exit code 2, as the flag
// package's.
func (c *cli) usageError(fs *cmdFlags, format string, args ...any) error {
	fmt.Fprintf(c.stderr, "%s: %s; usage: %s %s (see %s -h)\n", fs.Name(), fmt.Sprintf(format, args...),
		fs.Name(), fs.usage, fs.Name())
	return exitCodeError{2}
}

// parse parses args into fs. Flags may come anywhere among the other
// arguments (logs ID -f), as with most command-line tools, unless
// interspersed is false: then the first non-flag argument ends them (exec
// CMD -x). After "--" everything is an argument. -h prints the help on
// stdout; it and errors have been reported when parse returns the error,
// the exitCodeError to return (0 for -h).
func (c *cli) parse(fs *cmdFlags, args []string, interspersed bool) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printHelp(fs)
				return nil, exitCodeError{0}
			}
			return nil, c.usageError(fs, "%v", err)
		}
		remaining := fs.Args()
		used := len(args) - len(remaining)
		if len(remaining) == 0 || !interspersed || (used > 0 && args[used-1] == "--") {
			return append(rest, remaining...), nil
		}
		rest = append(rest, remaining[0])
		args = remaining[1:]
	}
}

// connFlags are the flags that say which agent to talk to.
type connFlags struct {
	url, token string
}

func addConnFlags(fs *flag.FlagSet) *connFlags {
	cf := &connFlags{}
	fs.StringVar(&cf.url, "url", "", "the agent's `URL`, with its base path if it has one (env SANDBOX_URL)")
	fs.StringVar(&cf.token, "token", "", "the agent's bearer `secret` (env SANDBOX_SECRET; prefer the env: arguments are visible to every process)")
	return cf
}

// connect returns a client for the agent that cf or the environment names;
// the caller closes its idle connections once it is done. If beforeRead is
// not nil, it runs before each read of a reply's body.
func (c *cli) connect(cf *connFlags, beforeRead func()) (*client.Client, error) {
	url := cmpOr(cf.url, c.getenv("SANDBOX_URL"))
	if url == "" {
		return nil, errors.New("no agent URL: give -url or set SANDBOX_URL (such as http://127.0.0.1:3030)")
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	token := cmpOr(cf.token, c.getenv("SANDBOX_SECRET"))
	if token == "" {
		return nil, errors.New("no token: set SANDBOX_SECRET (or give -token) to the agent's secret")
	}
	// A transport of its own, so that closing its idle connections at the
	// end leaves nothing behind (tests run the CLI in-process).
	var rt http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if beforeRead != nil {
		rt = hookedTransport{rt: rt, beforeRead: beforeRead}
	}
	// exec -i from a pipe: spliced into the socket (see WithSplicedStdin).
	return client.New(url, token, client.WithHTTPClient(&http.Client{Transport: rt}), client.WithSplicedStdin())
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hookedTransport runs beforeRead before each read of a reply's body. The
// streaming subcommands flush their output there: a read comes once every
// event received so far has been printed, so output is live without a
// write per line.
type hookedTransport struct {
	rt         http.RoundTripper
	beforeRead func()
}

func (t hookedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil {
		resp.Body = hookedBody{ReadCloser: resp.Body, beforeRead: t.beforeRead}
	}
	return resp, err
}

func (t hookedTransport) CloseIdleConnections() {
	if ci, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

type hookedBody struct {
	io.ReadCloser
	beforeRead func()
}

func (b hookedBody) Read(p []byte) (int, error) {
	b.beforeRead()
	return b.ReadCloser.Read(p)
}

// lineOut prints lines to stdout or stderr by the stream they came from,
// through a buffer each. Before it writes to one, it flushes the other, so
// the two keep the order in which the lines came.
type lineOut struct {
	stdout, stderr *bufio.Writer
	last           *bufio.Writer // the one written last
	err            error         // the first write error
}

func newLineOut(stdout, stderr io.Writer) *lineOut {
	return &lineOut{stdout: bufio.NewWriterSize(stdout, 64<<10), stderr: bufio.NewWriterSize(stderr, 4<<10)}
}

// line prints prefix, data and a newline to the stream's writer.
func (o *lineOut) line(stream client.Stream, prefix, data []byte) error {
	w := o.stdout
	if stream == client.Stderr {
		w = o.stderr
	}
	if o.last != nil && o.last != w {
		o.flushErr(o.last)
	}
	o.last = w
	// A bufio.Writer keeps its first error and returns it from then on,
	// so the last write reports the others'.
	_, _ = w.Write(prefix)
	_, _ = w.Write(data)
	if err := w.WriteByte('\n'); err != nil && o.err == nil {
		o.err = err
	}
	return o.err
}

// note prints a message of the CLI's own on stderr, in order with the
// lines.
func (o *lineOut) note(format string, args ...any) {
	o.line(client.Stderr, nil, fmt.Appendf(nil, "sandbox-executor: "+format, args...))
}

// flush writes out what both buffers hold and returns the first write
// error.
func (o *lineOut) flush() error {
	o.flushErr(o.stdout)
	o.flushErr(o.stderr)
	return o.err
}

func (o *lineOut) flushErr(w *bufio.Writer) {
	if err := w.Flush(); err != nil && o.err == nil {
		o.err = err
	}
}
