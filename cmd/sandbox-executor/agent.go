package main

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/checkpoint"
	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/search"
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

// agent is the agent's running parts: the API and its http.Server, the
// TCP proxy, and the registries they drive. newAgent builds them, start
// serves them and Close stops them, in the order Close documents. The
// main command, when there is one, is not a part: run supervises it.
type agent struct {
	log      zerolog.Logger
	runner   *executor.Runner
	procs    *procs.Registry
	terms    *terminals.Registry
	sessions *sessions.Registry
	contexts *contexts.Registry
	fwd      *proxy.Forwarder
	tunnels  *tunnels.Registry
	api      *server.Server
	srv      *http.Server
	apiLn    *connlimit.Listener // the API's listener, behind the connection cap
	proxyLn  net.Listener
	// cancelBase cancels every request's context; stopReaper stops the
	// PID-1 reaper, if any. Both are Close's first and last steps.
	cancelBase context.CancelFunc
	stopReaper context.CancelFunc
	// wg covers the goroutines start starts: the two servers and the
	// reaper. errc has one slot per server, so that neither can block.
	wg   sync.WaitGroup
	errc chan error
}

// newAgent builds the agent's parts for cfg on the bound listeners apiLn
// and proxyLn, which it owns from then on: it closes them if it fails.
// Every request's context derives from ctx's values, never from its
// cancellation: Close cancels them.
func (o options) newAgent(ctx context.Context, cfg config, getenv func(string) string, log zerolog.Logger,
	auth *server.Auth, apiLn, proxyLn net.Listener) (*agent, error) {
	apiPort, proxyPort := apiLn.Addr().(*net.TCPAddr).Port, proxyLn.Addr().(*net.TCPAddr).Port
	// Every child starts from the agent's environment without its
	// credentials, which have been read above (see isCredentialEnv).
	runner := &executor.Runner{MaxRunning: cfg.maxCmds, MaxInput: int64(cfg.inputBudget), Env: childEnviron(os.Environ())}
	setLimits(runner, log)
	if os.Getpid() == 1 {
		// As init, the agent inherits every orphan; see executor.Reaper.
		runner.Reaper = executor.NewReaper()
	}
	sess, err := sessions.NewRegistry(runner, sessions.Options{MaxEnvBytes: int64(cfg.envBudget)})
	if err != nil {
		apiLn.Close()
		proxyLn.Close()
		return nil, fmt.Errorf("sessions: %w", err)
	}
	a := &agent{log: log, runner: runner, sessions: sess, proxyLn: proxyLn, errc: make(chan error, 2)}
	popts := procs.Options{MaxRunning: cfg.maxProcs, MaxTotalBytes: cfg.logBudget, Log: log}
	a.procs = procs.NewRegistry(runner, popts)
	a.terms = terminals.NewRegistry(runner, terminals.Options{})
	a.contexts = contexts.NewRegistry(runner, contexts.Options{MaxContexts: cfg.maxContexts})
	o.setMemoryLimit(log, getenv, a.procs.LogBudget())
	// The agent's own ports are never forwarded to: the proxy bound to
	// itself would loop on its first connection.
	a.fwd = &proxy.Forwarder{Log: log, Reserved: []int{apiPort, proxyPort}}
	// Nor is a tunnel let into them: a tunnel to the API could open more.
	a.tunnels = &tunnels.Registry{Max: cfg.maxTunnels, Reserved: []int{apiPort, proxyPort}, Log: log}
	cps, err := checkpoint.Open(checkpoint.Options{Dir: cfg.stateDir, Budget: int64(cfg.cpBudget), BudgetText: cfg.cpBudgetText})
	if err != nil {
		apiLn.Close()
		proxyLn.Close()
		sess.Close(ctx)
		return nil, fmt.Errorf("state directory %s (-state-dir): %w", cfg.stateDir, err)
	}
	// Disk metrics describe the file system of the working directory, which
	// commands start in unless they name another.
	wd, _ := os.Getwd()
	deps := server.Deps{Runner: runner, Procs: a.procs, Forwarder: a.fwd, Terminals: a.terms, Sessions: sess,
		Contexts: a.contexts, Resources: stats.New(wd), Tunnels: a.tunnels, Search: search.New(search.LookRG()), Checkpoints: cps}
	a.api = server.New(log, auth, deps, server.Config{
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
		MCP:                cfg.mcp,
		MaxWatches:         cfg.maxWatches,
		MaxWatchedDirs:     cfg.maxWatchDirs,
	})
	// Every request's context derives from baseCtx. Cancelling it at
	// shutdown kills the process groups of /run commands in flight, ends
	// event streams with their final event and closes terminal WebSockets
	// (going away).
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	a.cancelBase = cancelBase
	a.srv = &http.Server{
		Handler:           a.api,
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
	a.apiLn = a.api.Listener(a.srv, apiLn)
	return a, nil
}

// start serves the API and the TCP proxy and, as PID 1, runs the reaper.
// A server that fails is reported on errc; Close stops them all.
func (a *agent) start(ctx context.Context) {
	a.wg.Add(2)
	go serveAPI(&a.wg, a.errc, a.srv, a.apiLn)
	go serveProxy(&a.wg, a.errc, a.fwd, a.proxyLn)
	reapCtx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	a.stopReaper = stopReaper
	if a.runner.Reaper != nil {
		a.wg.Add(1)
		go reap(reapCtx, &a.wg, a.runner.Reaper)
	}
}

// Close stops the agent's parts in this order, within ctx:
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
//     process groups (`npm start &`);
//  9. stop the reaper, last: the processes just killed left zombies; and
//     wait for start's goroutines.
//
// Each step runs whatever the previous ones returned; each failure is
// logged as a warning, and Close returns them joined. Call it once, after
// start.
func (a *agent) Close(ctx context.Context) error {
	start := time.Now()
	a.cancelBase()
	var errs []error
	warn := func(err error, msg string) {
		if err != nil {
			a.log.Warn().Err(err).Msg(msg)
			errs = append(errs, fmt.Errorf("%s: %w", msg, err))
		}
	}
	httpCtx, cancel := context.WithTimeout(ctx, httpShutdownTimeout)
	defer cancel()
	if err := a.srv.Shutdown(httpCtx); err != nil {
		a.log.Warn().Err(err).Msg("API shutdown timed out; closing the remaining connections")
		a.srv.Close()
	}
	// Hijacked connections are not the http.Server's to wait for.
	warn(a.tunnels.Close(ctx), "tunnels shutdown")
	warn(a.api.Close(ctx), "API close")
	warn(a.fwd.Close(ctx), "TCP proxy shutdown")
	warn(a.terms.Close(ctx), "terminals shutdown")
	warn(a.contexts.Close(ctx), "code contexts shutdown")
	warn(a.procs.Close(ctx), "background processes shutdown")
	warn(a.sessions.Close(ctx), "sessions shutdown")
	if n := a.runner.KillAll(); n > 0 {
		a.log.Info().Int("groups", n).Msg("killed what finished commands left running")
	}
	a.log.Info().Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Msg("stopped")
	a.stopReaper()
	a.wg.Wait()
	return errors.Join(errs...)
}

// reap runs r until ctx ends.
//
// reap runs in its own goroutine; it ends when ctx ends.
func reap(ctx context.Context, wg *sync.WaitGroup, r *executor.Reaper) {
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

// warnWriter logs net/http's error-log lines (TLS handshake failures,
// accept retries, handler panics) as warnings.
type warnWriter struct{ log zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
