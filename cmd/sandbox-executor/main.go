// Command sandbox-executor is the agent inside a sandbox: it serves the
// Sandbox Executor API over HTTP, forwards a TCP port, and optionally runs
// the sandbox's own main command (given after "--") as its child.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/server"
	"github.com/sandbox-executor/sandbox-executor/sessions"
	"github.com/sandbox-executor/sandbox-executor/stats"
	"github.com/sandbox-executor/sandbox-executor/terminals"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
)

const (
	// httpShutdownTimeout bounds the graceful part of the API's shutdown;
	// the connections still open after it are closed.
	httpShutdownTimeout = 3 * time.Second
	// shutdownTimeout bounds the whole shutdown of the agent's own parts,
	// keeping the exit under the 5 s that orchestrators allow.
	shutdownTimeout = 4500 * time.Millisecond
)

func main() {
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
// where the start-up and shutdown order is written down in full.
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

	apiPort, proxyPort := apiLn.Addr().(*net.TCPAddr).Port, proxyLn.Addr().(*net.TCPAddr).Port
	// Every child starts from the agent's environment without its
	// credentials, which have been read above (see isCredentialEnv).
	runner := &executor.Runner{MaxRunning: cfg.maxCmds, MaxInput: int64(cfg.inputBudget), Env: childEnviron(os.Environ())}
	if os.Getpid() == 1 {
		// As init, the agent inherits every orphan; see executor.Reaper.
		runner.Reaper = executor.NewReaper()
	}
	sess, err := sessions.New(runner, sessions.Options{MaxEnvBytes: int64(cfg.envBudget)})
	if err != nil {
		apiLn.Close()
		proxyLn.Close()
		return fmt.Errorf("sessions: %w", err)
	}
	popts := procs.Options{MaxRunning: cfg.maxProcs, MaxTotalBytes: cfg.logBudget, Log: log}
	reg := procs.NewRegistry(runner, popts)
	terms := terminals.NewRegistry(runner, terminals.Options{})
	o.setMemoryLimit(log, getenv, memoryBudgets{logs: int64(reg.LogBudget()), input: runner.InputBudget(), sessionEnvs: sess.EnvBudget()})
	// The agent's own ports are never forwarded to: the proxy bound to
	// itself would loop on its first connection.
	fwd := &proxy.Forwarder{Log: log, Reserved: []int{apiPort, proxyPort}}
	// Nor is a tunnel let into them: a tunnel to the API could open more.
	tuns := &tunnels.Registry{Max: cfg.maxTunnels, Reserved: []int{apiPort, proxyPort}, Log: log}
	// Disk metrics describe the file system of the working directory, which
	// commands start in unless they name another.
	wd, _ := os.Getwd()
	deps := server.Deps{Runner: runner, Procs: reg, Forwarder: fwd, Terminals: terms, Sessions: sess, Resources: stats.New(wd),
		Tunnels: tuns}
	api := server.New(log, auth, deps, server.Config{
		BasePath:           cfg.basePath,
		KeepAlive:          cfg.keepAlive,
		StallTimeout:       cfg.stall,
		BodyTimeout:        cfg.bodyTime,
		UnauthTimeout:      cfg.unauthTime,
		MaxConns:           cfg.maxConns,
		ProxyPort:          proxyPort,
		APIPort:            apiPort,
		Version:            version,
		MetricsOpen:        cfg.metricsOpen,
		TrustForwardedHost: cfg.trustFwdHost,
		MaxUpload:          int64(cfg.maxUpload),
		ExtractEntries:     cfg.extractMax,
		ExtractTimeout:     cfg.extractTime,
	})
	// Every request's context derives from baseCtx. Cancelling it at
	// shutdown kills the process groups of /run commands in flight, ends
	// event streams with their final event and closes terminal WebSockets
	// (going away).
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           api,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		// No WriteTimeout: event streams and long /run calls last as long
		// as their commands.
		ErrorLog: stdlog.New(warnWriter{log}, "", 0),
	}
	// The listener caps connections and gives those that never
	// authenticate a shorter timeout than ReadHeaderTimeout and
	// IdleTimeout above, which apply in full to authenticated ones.
	apiConns := api.Listener(srv, apiLn)

	// wg covers every goroutine started here: the two servers and, in
	// main-command mode, the command's waiter and supervisor.
	var wg sync.WaitGroup
	serveErr := make(chan error, 2) // one slot per server, so neither can block
	wg.Add(2)
	go serveAPI(&wg, serveErr, srv, apiConns)
	go serveProxy(&wg, serveErr, fwd, proxyLn)
	reapCtx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReaper()
	if runner.Reaper != nil {
		wg.Add(1)
		go reap(&wg, reapCtx, runner.Reaper)
	}
	ev := log.Info().Str("api", apiLn.Addr().String()).Str("proxy", proxyLn.Addr().String()).
		Str("auth_mode", cfg.authMode).Str("base_path", cfg.basePath).Int("max_conns", apiConns.Max()).
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
		child, err = o.startMain(runCtx, &wg, sigc, cfg.command, runner, stderr, log)
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
		case err = <-serveErr:
			log.Error().Err(err).Msg("shutting down")
		}
	}
	// Teardown, in the order shutdown documents: requests, API, proxy,
	// terminals, background processes, sessions; the main command is
	// stopped alongside.
	stopChild()
	shutdown(log, cancelBase, srv, api, tuns, fwd, terms, reg, sess, runner)
	stopReaper() // last: the background processes just killed left zombies
	wg.Wait()    // the main command, if any, has exited: killed at the latest after its grace
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

// reap runs r until ctx ends.
//
// reap runs in its own goroutine; it ends when ctx ends.
func reap(wg *sync.WaitGroup, ctx context.Context, r *executor.Reaper) {
	defer wg.Done()
	r.Run(ctx)
}

// serveAPI serves the API on ln.
//
// serveAPI runs in its own goroutine; it ends when srv is shut down or
// closed, or when ln fails, which it reports on errc.
func serveAPI(wg *sync.WaitGroup, errc chan<- error, srv *http.Server, ln net.Listener) {
	defer wg.Done()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		errc <- fmt.Errorf("API server: %w", err)
	}
}

// serveProxy forwards the connections accepted on ln.
//
// serveProxy runs in its own goroutine; it ends when fwd is closed, or
// when ln fails, which it reports on errc.
func serveProxy(wg *sync.WaitGroup, errc chan<- error, fwd *proxy.Forwarder, ln net.Listener) {
	defer wg.Done()
	if err := fwd.Serve(ln); err != nil && !errors.Is(err, proxy.ErrClosed) {
		errc <- fmt.Errorf("TCP proxy: %w", err)
	}
}

// shutdown stops the agent's own parts in this order, within
// shutdownTimeout in all:
//  1. cancel the base context: /run commands in flight are killed (their
//     process groups), event streams end with their final event, and
//     terminal WebSockets close with 1001 (going away); tunnels and
//     previews (WebSockets included) are closed;
//  2. shut the API down: stop accepting, let those handlers answer, for
//     at most httpShutdownTimeout, then close what is left;
//  3. close the tunnels registry, waiting for the tunnels to be gone
//     (hijacked connections are not the http.Server's to wait for), and
//     the preview proxy's idle connections to the apps;
//  4. close the TCP forwarder and its live connections;
//  5. close the terminals: every process of each terminal's session is
//     killed (jobs of interactive shells are in groups of their own, so
//     this comes before the group kills below);
//  6. close the registry: every background process group is killed;
//  7. delete the sessions: what is left in their process groups is
//     killed, their temp workdirs and the state directory removed;
//  8. kill what finished commands, /run ones included, left in their
//     process groups (`npm start &`).
//
// The main command, if any, is stopped by its supervisor meanwhile.
func shutdown(log zerolog.Logger, cancelBase context.CancelFunc, srv *http.Server, api *server.Server,
	tuns *tunnels.Registry, fwd *proxy.Forwarder, terms *terminals.Registry, reg *procs.Registry,
	sess *sessions.Registry, runner *executor.Runner) {
	start := time.Now()
	cancelBase()
	httpCtx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(httpCtx); err != nil {
		log.Warn().Err(err).Msg("API shutdown timed out; closing the remaining connections")
		srv.Close()
	}
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(shutdownTimeout))
	defer cancel()
	// Hijacked connections are not the http.Server's to wait for.
	if err := tuns.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("tunnels shutdown")
	}
	if err := api.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("API close")
	}
	if err := fwd.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("TCP proxy shutdown")
	}
	if err := terms.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("terminals shutdown")
	}
	if err := reg.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("background processes shutdown")
	}
	if err := sess.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("sessions shutdown")
	}
	if n := runner.KillAll(); n > 0 {
		log.Info().Int("groups", n).Msg("killed what finished commands left running")
	}
	log.Info().Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Msg("stopped")
}

// warnWriter logs net/http's error-log lines (TLS handshake failures,
// accept retries, handler panics) as warnings.
type warnWriter struct{ log zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
