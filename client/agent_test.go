package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/server"
	"github.com/sandbox-executor/sandbox-executor/sessions"
	"github.com/sandbox-executor/sandbox-executor/terminals"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
)

const testSecret = "client-test-secret"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testAgent is a real agent (server, executor, registries, forwarder,
// tunnels) on a loopback httptest server, and a Client for it.
type testAgent struct {
	ts  *httptest.Server
	c   *client.Client
	reg *procs.Registry
}

// agentConfig configures startAgent; the zero value is the defaults.
type agentConfig struct {
	server server.Config
	procs  procs.Options
	shell  string                          // the runner's shell; empty means /bin/sh
	wrap   func(http.Handler) http.Handler // if not nil, wraps the agent's handler to look at requests
}

// startAgent starts an agent configured by ac until the test ends, built
// and stopped as the server package's newTestServer does it, which this
// package cannot import: every dependency, the TCP proxy served on a
// loopback port, the connection limiter in front, and the order of the
// agent's shutdown at the end (agent.Close in cmd/sandbox-executor). The
// replies are not checked against openapi.yaml here: that checker lives in
// the server package's tests.
func startAgent(t *testing.T, ac agentConfig) *testAgent {
	t.Helper()
	auth, err := server.NewStaticAuth(testSecret)
	require.NoError(t, err)
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if ac.server.ProxyPort == 0 {
		ac.server.ProxyPort = proxyLn.Addr().(*net.TCPAddr).Port
	}
	runner := &executor.Runner{Shell: ac.shell, DrainDelay: 500 * time.Millisecond}
	reg := procs.NewRegistry(runner, ac.procs)
	terms := terminals.NewRegistry(runner, terminals.Options{DrainDelay: 200 * time.Millisecond})
	fwd := &proxy.Forwarder{}
	sess, err := sessions.NewRegistry(runner, sessions.Options{StateDir: t.TempDir(), WorkdirParent: t.TempDir()})
	require.NoError(t, err)
	tuns := &tunnels.Registry{Reserved: []int{ac.server.ProxyPort}}
	ctxs := contexts.NewRegistry(runner, contexts.Options{})
	srv := server.New(zerolog.Nop(), auth,
		server.Deps{Runner: runner, Procs: reg, Forwarder: fwd, Terminals: terms, Sessions: sess, Contexts: ctxs, Tunnels: tuns}, ac.server)
	var h http.Handler = srv
	if ac.wrap != nil {
		h = ac.wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	tuns.Reserved = append(tuns.Reserved, ts.Listener.Addr().(*net.TCPAddr).Port)
	ts.Listener = srv.Listener(ts.Config, ts.Listener) // the connection limiter, as the agent serves it
	baseCtx, cancelBase := context.WithCancel(context.Background())
	ts.Config.BaseContext = func(net.Listener) context.Context { return baseCtx }
	served := make(chan error, 1)
	go func() { served <- fwd.Serve(proxyLn) }()
	ts.Start()
	t.Cleanup(func() {
		cancelBase()
		ts.CloseClientConnections()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, tuns.Close(ctx))
		require.NoError(t, srv.Close(ctx))
		require.NoError(t, fwd.Close(ctx))
		if err := <-served; !errors.Is(err, proxy.ErrClosed) { // closed before it served: as the agent, no failure
			require.NoError(t, err)
		}
		require.NoError(t, terms.Close(ctx))
		require.NoError(t, ctxs.Close(ctx))
		require.NoError(t, reg.Close(ctx))
		require.NoError(t, sess.Close(ctx))
		runner.KillAll()
	})
	return &testAgent{ts: ts, c: newClient(t, ts, ts.URL+ac.server.BasePath, testSecret), reg: reg}
}

// newClient returns a Client for url that uses the test server's
// transport, whose connections the server closes at the end.
func newClient(t *testing.T, ts *httptest.Server, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token, client.WithHTTPClient(ts.Client()))
	require.NoError(t, err)
	return c
}

// relay forwards loopback connections to an agent and cuts the ones it is
// told to, to play a network that drops event streams.
type relay struct {
	addr   string
	target string
	// cuts[k], if positive, is how many bytes of the agent's reply
	// connection k (from 0) carries before the relay closes it.
	cuts []int64
	// hold, if not nil, stops connections after the first before they
	// reach the agent, until it is closed.
	hold chan struct{}

	mu    sync.Mutex // guards conns
	conns int        // connections accepted so far
}

// startRelay starts a relay to target (host:port) until the test ends.
func startRelay(t *testing.T, target string, cuts []int64, hold chan struct{}) *relay {
	t.Helper()
	r := &relay{target: target, cuts: cuts, hold: hold}
	ln := testutil.Serve(t, r.handle)
	r.addr = ln.Addr().String()
	return r
}

// accepted returns how many connections the relay has accepted.
func (r *relay) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}

// handle relays one connection; testutil.Serve runs it and closes c.
func (r *relay) handle(c net.Conn) {
	r.mu.Lock()
	k := r.conns
	r.conns++
	r.mu.Unlock()
	if k > 0 && r.hold != nil {
		<-r.hold // the test closes it, at the latest in its cleanup
	}
	agent, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer agent.Close()
	limit := int64(-1)
	if k < len(r.cuts) && r.cuts[k] > 0 {
		limit = r.cuts[k]
	}
	done := make(chan struct{}) // the upstream copier's end
	go relayUp(done, agent, c)
	if limit > 0 {
		_, _ = io.CopyN(c, agent, limit)
	} else {
		_, _ = io.Copy(c, agent)
	}
	c.Close()
	agent.Close()
	<-done
}

// relayUp copies the client's requests to the agent. When the client's
// side ends it closes the agent's, which ends the downstream copy too.
//
// relayUp runs in its own goroutine; it ends when either connection is
// closed, and then closes done.
func relayUp(done chan<- struct{}, agent, c net.Conn) {
	defer close(done)
	_, _ = io.Copy(agent, c)
	agent.Close()
}
