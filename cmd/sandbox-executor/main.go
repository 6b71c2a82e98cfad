// Command sandbox-executor is the agent inside a sandbox: it serves the
// Sandbox Executor API over HTTP, forwards a TCP port, and optionally runs
// the sandbox's own main command (given after "--") as its child.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == executor.HelperArg {
		// The rlimit helper of a limited command: it sets the limits and
		// becomes the command, before the agent starts anything.
		executor.RunHelper(os.Args[2:])
	}
	ctx, stop := notifySignals(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	var exit exitCodeError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "sandbox-executor:", err)
		os.Exit(1)
	}
}

// exitCodeError makes main exit with code and print nothing: the main
// command's exit code, or a flag error that the flag package has already
// reported.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("exit code %d", e.code) }

// run runs the agent until ctx ends or, in main-command mode, until the
// main command exits; then it shuts down within about 5 s.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	return options{}.run(ctx, args, getenv, stderr)
}

// options are the seams tests use. The zero value is what main uses.
type options struct {
	// ready, if set, is called with the actual listen addresses once both
	// listeners are bound (a port of 0 picks a free one).
	ready func(api, proxy net.Addr)
	// killGrace is how long the main command has to exit after SIGTERM
	// or SIGINT before its process group is killed. If zero, 5 s.
	killGrace time.Duration
	// stdin and stdout are the main command's, and stdout is where
	// -version prints. If nil, os.Stdin and os.Stdout. The main command's
	// stderr is run's stderr.
	stdin  io.Reader
	stdout io.Writer
	// memoryLimit, if set, replaces debug.SetMemoryLimit, which tests must
	// not call on their own process.
	memoryLimit func(int64) int64
}

// run is run with o's seams. It is long because it is the one place
// where start-up is written down in full, and when the agent stops; the
// order of shutdown is agent.Close's.
func (o options) run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) == 1 && isHelpFlag(args[0]) {
		args = []string{"help"}
	}
	if len(args) > 0 && isCLICommand(args[0]) { // exec, logs, cp, tunnel, help: see cli.go
		return o.runCLI(ctx, args, getenv, stderr)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	if cfg.version {
		_, err := fmt.Fprintln(o.out(), "sandbox-executor", version)
		return err
	}
	log := newLogger(stderr, cfg.logLevel, cfg.logFormat)
	// Auth fails on configuration only, so it comes before anything that
	// would have to be undone.
	auth, err := newAuth(cfg)
	if err != nil {
		return err
	}
	apiLn, proxyLn, err := listen(cfg)
	if err != nil {
		return err
	}

	a, err := o.newAgent(ctx, cfg, getenv, log, auth, apiLn, proxyLn)
	if err != nil {
		return err
	}
	a.start(ctx)
	// wg covers the goroutines started here: in main-command mode, the
	// command's waiter and supervisor.
	var wg sync.WaitGroup
	ev := log.Info().Str("api", apiLn.Addr().String()).Str("proxy", proxyLn.Addr().String()).
		Str("auth_mode", cfg.authMode).Str("base_path", cfg.basePath).Int("max_conns", a.apiLn.Max()).
		Bool("metrics_open", cfg.metricsOpen).Str("version", version)
	if cfg.authMode == authPool {
		ev = ev.Bool("claimed", auth.Claimed())
	}
	ev.Msg("listening")
	if o.ready != nil {
		o.ready(apiLn.Addr(), proxyLn.Addr())
	}

	// runCtx also ends when the agent stops for a reason of its own (a
	// server failed), so that the main command is told to stop too.
	runCtx, stopChild := context.WithCancel(ctx)
	defer stopChild()
	var child *mainCommand
	var childDone <-chan struct{} // nil, never ready, without a main command
	if len(cfg.command) > 0 {
		sigc := make(chan os.Signal, 8)
		// Registered before the start, so that no signal meant for the
		// child takes its default action on the agent; kept until run
		// returns for the same reason.
		// SIGTERM and SIGINT also end ctx (see main) and start the grace.
		signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
			syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
		defer signal.Stop(sigc)
		child, err = o.startMain(runCtx, &wg, sigc, cfg.command, a.runner, stderr, log)
		if child != nil {
			childDone = child.done
		}
	}
	if err == nil {
		select {
		case <-ctx.Done():
			ev := log.Info()
			if sig := shutdownSignal(ctx); sig != "" {
				ev = ev.Str("signal", sig)
			}
			ev.Msg("shutting down")
		case <-childDone:
			log.Info().Int("code", child.code).Msg("main command exited; shutting down")
		case err = <-a.errc:
			log.Error().Err(err).Msg("shutting down")
		}
	}
	// Teardown, in the order agent.Close documents: requests, API, proxy,
	// terminals, background processes, sessions, the reaper; the main
	// command is stopped alongside.
	stopChild()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), shutdownTimeout)
	_ = a.Close(closeCtx) // each failure is logged as a warning: the exit code is not the shutdown's
	cancelClose()
	wg.Wait() // the main command, if any, has exited: killed at the latest after its grace
	switch {
	case err != nil:
		return err
	case child != nil:
		return exitCodeError{child.code}
	}
	return nil
}

func (o options) out() io.Writer {
	if o.stdout == nil {
		return os.Stdout
	}
	return o.stdout
}

// listen binds both listeners before anything is served, so that a port
// in use is reported at once and port 0 can be used.
func listen(cfg config) (api, prx net.Listener, err error) {
	api, err = net.Listen("tcp", cfg.apiAddr)
	if err != nil {
		return nil, nil, listenError("API", cfg.apiAddr, "-addr or -port", err)
	}
	prx, err = net.Listen("tcp", cfg.proxyAddr)
	if err != nil {
		api.Close()
		return nil, nil, listenError("TCP proxy", cfg.proxyAddr, "-proxy-addr or -proxy-port", err)
	}
	return api, prx, nil
}

// listenError explains a failed listen on addr: a port in use is the
// common case, and says which flags choose another.
func listenError(what, addr, flags string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s listener: %s is already in use (another agent?): stop what listens there, or choose another address with %s", what, addr, flags)
	}
	return fmt.Errorf("%s listener: %w", what, err)
}
