package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const logsDoc = `Prints the log of background process ID (from /start_process): the lines
the agent still holds, each to stdout or stderr as the process printed it.
With -f it goes on printing new lines until the process ends (or Ctrl-C),
and reconnects by itself if the connection drops, without repeating or
skipping a line; lines the agent dropped meanwhile are reported on stderr.
`

// logs runs "sandbox-executor logs": a process's log through
// /process_logs_streaming.
func (c *cli) logs(ctx context.Context, args []string) error {
	fs := c.flagSet("logs", "[flags] ID", logsDoc)
	cf := addConnFlags(fs.FlagSet)
	follow := fs.Bool("f", false, "follow the log until the process ends")
	stamps := fs.Bool("t", false, "prefix each line with the time the agent read it (RFC 3339, UTC)")
	ids, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return c.usageError(fs, "want one process ID, got %d arguments", len(ids))
	}
	id := ids[0]

	out := newLineOut(c.stdout, c.stderr)
	defer out.flush()
	cl, err := c.connect(cf, func() { out.flush() })
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	var prefix []byte
	for ev, err := range cl.FollowLogs(ctx, id, client.LogsOptions{NoFollow: !*follow}) {
		switch {
		case errors.Is(err, client.ErrProcessNotFound):
			return fmt.Errorf("the agent has no process with id %q", id)
		case err != nil:
			return err
		case ev.Type == client.EventMissed:
			out.note("%d lines were dropped from the agent's buffer before they could be read", ev.Missed)
		case ev.Type == client.EventLog:
			if *stamps {
				prefix = append(ev.Time.UTC().AppendFormat(prefix[:0], time.RFC3339Nano), ' ')
			}
			if out.line(ev.Stream, prefix, ev.Data) != nil {
				return out.err
			}
		}
	}
	return out.flush()
}
