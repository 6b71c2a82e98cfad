package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const waitPortDoc = `Waits until PORT is ready on the agent's side, where previews and
tunnels reach it (127.0.0.1 or ::1): a connection accepted, or with -http
a GET of PATH answered with a status from 200 to 399. Exits 0 when it is
ready, 1 otherwise (the reason on stderr): the timeout passed, or the
port listens only on an address the agent does not probe. Use it in place
of a sleep after starting a server.
`

// waitPort runs "sandbox-executor wait-port": POST /wait_for_port.
func (c *cli) waitPort(ctx context.Context, args []string) error {
	fs := c.flagSet("wait-port", "[flags] PORT", waitPortDoc)
	cf := addConnFlags(fs.FlagSet)
	path := fs.String("http", "", "probe with an HTTP GET of this `path` rather than a TCP connection")
	timeout := fs.String("timeout", "30s", "give up after this `duration` (30s, 5m, or a number of seconds)")
	words, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(words) != 1 {
		return c.usageError(fs, "want one PORT")
	}
	port, err := strconv.Atoi(words[0])
	if err != nil || port < 1 || port > 65535 {
		return c.usageError(fs, "invalid PORT %q: want a number from 1 to 65535", words[0])
	}
	w := client.PortWait{Port: port, Path: *path}
	if *path != "" {
		w.Mode = "http"
	}
	if w.Timeout, err = parseTimeout(*timeout); err != nil {
		return c.usageError(fs, "invalid -timeout %q: want a positive duration such as 30s or 5m, or a number of seconds", *timeout)
	}
	cl, err := c.connect(cf, nil)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	res, err := cl.WaitForPort(ctx, w)
	if err != nil {
		return err
	}
	if !res.Ready {
		fmt.Fprintf(c.stderr, "sandbox-executor wait-port: port %d is not ready: %s: %s\n", port, res.Reason, res.LastError)
		return exitCodeError{1}
	}
	_, err = fmt.Fprintf(c.stdout, "port %d is ready on %s after %s\n", port, res.Address, res.Waited)
	return err
}
