package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const psDoc = `Lists the agent's background processes, running and finished: id, pid,
status, exit code and command, one a line.
`

// ps runs "sandbox-executor ps": /list_processes as a table.
func (c *cli) ps(ctx context.Context, args []string) error {
	fs := c.flagSet("ps", "[flags]", psDoc)
	cf := addConnFlags(fs.FlagSet)
	rest, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return c.usageError(fs, "ps takes no arguments")
	}
	cl, err := c.connect(cf, nil)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	list, err := cl.ListProcesses(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPID\tSTATUS\tEXIT\tCOMMAND")
	for _, p := range list {
		exit := "-"
		if p.ExitCode != nil {
			exit = fmt.Sprint(*p.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.ID, p.PID, p.Status, exit, p.Command)
	}
	return tw.Flush()
}

const startDoc = `Starts CMD on the agent as a background process and prints its id, for
logs, kill and ps. One word is a shell command (sh -c), several the program
and its arguments, as for exec. It runs until it ends, is killed, or the
agent stops.
`

// start runs "sandbox-executor start": /start_process.
func (c *cli) start(ctx context.Context, args []string) error {
	fs := c.flagSet("start", "[flags] [--] CMD [ARG...]", startDoc)
	cf := addConnFlags(fs.FlagSet)
	o := addExecFlags(fs)
	words, err := c.parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return c.usageError(fs, "no command given")
	}
	opts, err := o.options(c, fs)
	if err != nil {
		return err
	}
	cmd := client.Command{Cmd: words[0], Cwd: opts.Cwd, Env: opts.Env, Session: opts.Session, User: opts.User, Timeout: opts.Timeout}
	if len(words) > 1 {
		cmd.Cmd = "exec " + shellWords(words)
		if opts.Session != "" {
			cmd.Cmd = shellWords(words) // the session's wrapper must see its end
		}
	}
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
	p, err := cl.StartProcess(ctx, cmd)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, p.ID)
	return err
}

// shellWords quotes each word for sh and joins them.
//
// TODO(argv): send argv to /start_process once it takes it.
func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

const killDoc = `Sends a signal (default SIGKILL) to background process ID's whole process
group, as /kill_process does. With SIGKILL it returns once the process is
gone.
`

// kill runs "sandbox-executor kill": /kill_process.
func (c *cli) kill(ctx context.Context, args []string) error {
	fs := c.flagSet("kill", "[flags] ID", killDoc)
	cf := addConnFlags(fs.FlagSet)
	sig := fs.String("signal", "", "the `signal` to send, a name (SIGTERM, TERM) or a number (default SIGKILL)")
	ids, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return c.usageError(fs, "want one process ID, got %d arguments", len(ids))
	}
	cl, err := c.connect(cf, nil)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	return cl.KillProcess(ctx, ids[0], *sig)
}
