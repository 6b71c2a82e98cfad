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
	"os/exec"
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
)

// version is reported by -version and /health. It is a variable, the one
// at package level, because the linker can set only variables:
// go build -ldflags "-X main.version=v1.2.3". Nothing assigns it at run time.
var version = "dev"

const (
	// httpShutdownTimeout bounds the graceful part of the API's shutdown;
	// the connections still open after it are closed.
	httpShutdownTimeout = 3 * time.Second
	// shutdownTimeout bounds the whole shutdown of the agent's own parts,
	// keeping the exit under the 5 s that orchestrators allow.
	shutdownTimeout = 4500 * time.Millisecond
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
}

// run is run with o's seams. It is long because it is the one place
// where the start-up and shutdown order is written down in full.
func (o options) run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 && isCLICommand(args[0]) { // exec, logs, cp: see cli.go
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
	log := zerolog.New(stderr).Level(cfg.logLevel).With().Timestamp().Logger()
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

	runner := &executor.Runner{}
	if os.Getpid() == 1 {
		// As init, the agent inherits every orphan; see executor.Reaper.
		runner.Reaper = executor.NewReaper()
	}
	reg := procs.NewRegistry(runner, procs.Options{})
	fwd := &proxy.Forwarder{Log: log}
	api := server.New(log, auth, runner, reg, fwd, server.Config{
		BasePath:      cfg.basePath,
		KeepAlive:     cfg.keepAlive,
		StallTimeout:  cfg.stall,
		BodyTimeout:   cfg.bodyTime,
		UnauthTimeout: cfg.unauthTime,
		MaxConns:      cfg.maxConns,
		ProxyPort:     proxyLn.Addr().(*net.TCPAddr).Port,
		Version:       version,
	})
	// Every request's context derives from baseCtx. Cancelling it at
	// shutdown kills the process groups of /run commands in flight and
	// ends event streams with their final event.
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
		Str("version", version)
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
		child, err = o.startMain(runCtx, &wg, sigc, cfg.command, stderr, log, runner.Reaper)
		if child != nil {
			childDone = child.done
		}
	}
	if err == nil {
		select {
		case <-ctx.Done():
			log.Info().Msg("shutting down")
		case <-childDone:
			log.Info().Int("code", child.code).Msg("main command exited; shutting down")
		case err = <-serveErr:
			log.Error().Err(err).Msg("shutting down")
		}
	}
	// Teardown, in the order shutdown documents: requests, API, proxy,
	// background processes; the main command is stopped alongside.
	stopChild()
	shutdown(log, cancelBase, srv, fwd, reg)
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

// newAuth returns the Auth of cfg's mode. A static Auth without a secret
// is an error.
func newAuth(cfg config) (*server.Auth, error) {
	if cfg.authMode == authPool {
		return server.NewPoolAuth(cfg.secretPath)
	}
	return server.NewStaticAuth(cfg.secret)
}

// listen binds both listeners before anything is served, so that a port
// in use is reported at once and port 0 can be used.
func listen(cfg config) (api, prx net.Listener, err error) {
	api, err = net.Listen("tcp", cfg.apiAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("API listener: %w", err)
	}
	prx, err = net.Listen("tcp", cfg.proxyAddr)
	if err != nil {
		api.Close()
		return nil, nil, fmt.Errorf("TCP proxy listener: %w", err)
	}
	return api, prx, nil
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
//     process groups) and event streams end with their final event;
//  2. shut the API down: stop accepting, let those handlers answer, for
//     at most httpShutdownTimeout, then close what is left;
//  3. close the TCP forwarder and its live connections;
//  4. close the registry: every background process group is killed.
//
// The main command, if any, is stopped by its supervisor meanwhile.
func shutdown(log zerolog.Logger, cancelBase context.CancelFunc, srv *http.Server, fwd *proxy.Forwarder, reg *procs.Registry) {
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
	if err := fwd.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("TCP proxy shutdown")
	}
	if err := reg.Close(ctx); err != nil {
		log.Warn().Err(err).Msg("background processes shutdown")
	}
	log.Info().Dur("duration", time.Since(start)).Msg("stopped")
}

// warnWriter logs net/http's error-log lines (TLS handshake failures,
// accept retries, handler panics) as warnings.
type warnWriter struct{ log zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

const (
	defaultKillGrace = 5 * time.Second
	// signalSettle is how long a cancelled ctx waits for the signal that
	// may have cancelled it. A signal reaches both main's NotifyContext
	// and the supervisor's channel, in no defined order; waiting a moment
	// forwards a real SIGINT as itself and only once, and a ctx cancelled
	// by other means as SIGTERM.
	signalSettle = 100 * time.Millisecond
)

// mainCommand is the sandbox's own main command, a child of the agent in
// a process group of its own.
type mainCommand struct {
	cmd   *exec.Cmd
	log   zerolog.Logger
	grace time.Duration
	done  chan struct{} // closed by wait once code is set
	code  int           // the exit code, 128+signal if a signal ended it
	// reaper, if not nil, started cmd and must be told when it is waited for.
	reaper *executor.Reaper
}

// startMain starts argv (no shell) with the agent's stdio. The command is
// given the signals that arrive on sigc; when ctx ends it gets SIGTERM,
// unless SIGTERM or SIGINT came first, and its process group is killed
// if it has not exited killGrace later. The two goroutines it starts are
// counted in wg.
func (o options) startMain(ctx context.Context, wg *sync.WaitGroup, sigc <-chan os.Signal, argv []string,
	stderr io.Writer, log zerolog.Logger, reaper *executor.Reaper) (*mainCommand, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.stdin, o.out(), stderr
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	// A group of its own: a terminal's Ctrl-C reaches the command only
	// through the agent, and the final SIGKILL reaches its children too.
	// (So, from a terminal, the command is not in the foreground group: it
	// cannot read the terminal.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Only for stdio that is not an *os.File (tests): exec then copies in
	// goroutines, which a grandchild holding the pipe must not keep alive.
	cmd.WaitDelay = time.Second
	start := cmd.Start
	if reaper != nil {
		start = func() error { return reaper.Start(cmd) }
	}
	if err := start(); err != nil {
		return nil, fmt.Errorf("starting the main command: %w", err)
	}
	m := &mainCommand{cmd: cmd, log: log, grace: o.killGrace, done: make(chan struct{}), reaper: reaper}
	if m.grace <= 0 {
		m.grace = defaultKillGrace
	}
	log.Info().Int("pid", cmd.Process.Pid).Msg("main command started")
	wg.Add(2)
	go m.wait(wg)
	go m.supervise(ctx, wg, sigc)
	return m, nil
}

// wait is the only caller of cmd.Wait.
//
// wait runs in its own goroutine; it ends when the command has exited.
func (m *mainCommand) wait(wg *sync.WaitGroup) {
	defer wg.Done()
	_ = m.cmd.Wait() // the exit status is read from ProcessState
	if m.reaper != nil {
		m.reaper.Done(m.cmd.Process.Pid)
	}
	m.code = exitCode(m.cmd.ProcessState)
	// What the command left running in its group must not outlive it: the
	// agent exits now. The group id cannot have been reused while any
	// member lives; if none does, ESRCH is the expected answer.
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		m.log.Warn().Err(err).Msg("killing what the main command left behind")
	}
	close(m.done)
}

// exitCode follows the shell's convention: 128+signal for a command that a
// signal ended.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 1 // not waited for: Wait itself failed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// supervise forwards the signals from sigc to the command, and after
// SIGTERM, SIGINT or the end of ctx gives it m.grace to exit before it
// kills the command's process group.
//
// supervise runs in its own goroutine; it ends when the command has
// exited, which the kill makes at most m.grace after ctx ends.
func (m *mainCommand) supervise(ctx context.Context, wg *sync.WaitGroup, sigc <-chan os.Signal) {
	defer wg.Done()
	ctxDone := ctx.Done()
	var settle, grace <-chan time.Time
	startGrace := func() {
		settle = nil
		if grace == nil {
			grace = time.After(m.grace)
		}
	}
	for {
		select {
		case <-m.done:
			return
		case sig := <-sigc:
			m.signal(sig)
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				startGrace()
			}
		case <-ctxDone:
			ctxDone = nil
			if grace == nil {
				settle = time.After(signalSettle)
			}
		case <-settle:
			m.signal(syscall.SIGTERM)
			startGrace()
		case <-grace:
			grace = nil
			m.log.Warn().Dur("grace", m.grace).Msg("main command still running; killing its process group")
			if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				m.log.Error().Err(err).Msg("killing the main command")
			}
		}
	}
}

// signal sends sig to the command itself, as a terminal or an init would.
// os.Process.Signal never reaches a process that has been waited for.
func (m *mainCommand) signal(sig os.Signal) {
	m.log.Debug().Stringer("signal", sig).Msg("forwarding signal to the main command")
	if err := m.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		m.log.Warn().Err(err).Stringer("signal", sig).Msg("forwarding signal to the main command")
	}
}
