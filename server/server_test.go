package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/terminals"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
)

const testSecret = "test-secret"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == executor.HelperArg {
		executor.RunHelper(os.Args[2:]) // the test binary stands in for the agent's (see limitRunner)
	}
	goleak.VerifyTestMain(m)
}

// testServer configures newTestServer; the zero value is the defaults.
type testServer struct {
	cfg Config
	// runner runs every command. If nil, a Runner with a 500 ms
	// DrainDelay.
	runner *executor.Runner
	procs  procs.Options
	// terms configures the terminals. If its DrainDelay is zero, 200 ms.
	terms terminals.Options
	// contexts configures the code contexts.
	contexts contexts.Options
	// tunnels holds the tunnels. If nil, an empty Registry. The API's and
	// the TCP proxy's ports are added to its Reserved, as the agent
	// reserves them.
	tunnels *tunnels.Registry
	// auth checks the tokens. If nil, a static Auth of testSecret.
	auth *Auth
	// log is the Server's logger. The zero value logs nothing.
	log zerolog.Logger
	// setup, if set, is called with the Server before it serves
	// anything: the place to replace its seams (freeSpace), its logger or
	// its routes without a data race.
	setup func(*Server)
	// listener, if set, wraps the loopback listener inside the
	// connection limiter, as smallSendBuffers does.
	listener func(net.Listener) net.Listener
	// http, if set, is called with the http.Server before it starts.
	http func(*http.Server)
	// base, if set, is the parent of every request's base context:
	// cancelling it plays the start of the agent's shutdown.
	base context.Context
}

// newTestServer starts the API on a loopback listener as the agent does:
// every dependency built, the TCP proxy served on a loopback port of its
// own (its port is Config.ProxyPort unless o sets one, as APIPort is the
// API's), the connection limiter in front, and every request and reply
// checked against openapi.yaml. When the test ends it stops everything in
// the order of the agent's shutdown (agent.Close in cmd/sandbox-executor):
// the base context, the HTTP server (at once: a test leaves no client to
// wait for), tunnels, the Server, the TCP proxy, terminals, background
// processes, sessions, what finished commands left running.
func newTestServer(tb testing.TB, o testServer) (*httptest.Server, *Server) {
	tb.Helper()
	o = o.withDefaults(tb)
	apiLn, proxyLn := loopback(tb), loopback(tb)
	apiPort, proxyPort := apiLn.Addr().(*net.TCPAddr).Port, proxyLn.Addr().(*net.TCPAddr).Port
	if o.cfg.APIPort == 0 {
		o.cfg.APIPort = apiPort
	}
	if o.cfg.ProxyPort == 0 {
		o.cfg.ProxyPort = proxyPort
	}
	o.tunnels.Reserved = append(o.tunnels.Reserved, apiPort, proxyPort)
	runner := o.runner
	reg := procs.NewRegistry(runner, o.procs)
	terms := terminals.NewRegistry(runner, o.terms)
	sess := newTestSessions(tb, runner)
	ctxs := contexts.NewRegistry(runner, o.contexts)
	// No Reserved ports: what the tests check is the HTTP layer's own
	// refusal of the agent's ports (see ports_test.go).
	fwd := &proxy.Forwarder{}
	s := New(o.log, o.auth, Deps{Runner: runner, Procs: reg, Forwarder: fwd, Terminals: terms,
		Sessions: sess, Contexts: ctxs, Tunnels: o.tunnels}, o.cfg)
	if o.setup != nil {
		o.setup(s)
	}
	srv, cancelBase, handlers := o.serve(tb, s, apiLn)
	served := make(chan error, 1)
	go func() { served <- fwd.Serve(proxyLn) }()
	tb.Cleanup(func() {
		cancelBase()
		srv.CloseClientConnections()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(tb, o.tunnels.Close(ctx))
		require.NoError(tb, s.Close(ctx))
		require.NoError(tb, fwd.Close(ctx))
		if err := <-served; !errors.Is(err, proxy.ErrClosed) { // closed before it served: as the agent, no failure
			require.NoError(tb, err)
		}
		require.NoError(tb, terms.Close(ctx))
		require.NoError(tb, ctxs.Close(ctx))
		require.NoError(tb, reg.Close(ctx))
		require.NoError(tb, sess.Close(ctx))
		runner.KillAll()
		handlers.Wait()
	})
	return srv, s
}

// withDefaults returns o with its nil and zero fields set to the
// defaults their comments give.
func (o testServer) withDefaults(tb testing.TB) testServer {
	tb.Helper()
	if o.runner == nil {
		o.runner = &executor.Runner{DrainDelay: 500 * time.Millisecond}
	}
	if o.terms.DrainDelay == 0 {
		o.terms.DrainDelay = 200 * time.Millisecond
	}
	if o.tunnels == nil {
		o.tunnels = &tunnels.Registry{}
	}
	if o.auth == nil {
		auth, err := NewStaticAuth(testSecret)
		require.NoError(tb, err)
		o.auth = auth
	}
	if o.base == nil {
		o.base = context.Background()
	}
	return o
}

// serve starts serving s on ln, checked against openapi.yaml, behind o's
// listener wrapper and the connection limiter. It returns the server, the
// cancel of every request's base context, and the count of running
// handlers: httptest's Close does not wait for the handlers of hijacked
// connections (tunnels, WebSockets), and every handler must have returned,
// and its exchange been checked, when the test ends.
func (o testServer) serve(tb testing.TB, s *Server, ln net.Listener) (*httptest.Server, context.CancelFunc, *sync.WaitGroup) {
	tb.Helper()
	handlers := new(sync.WaitGroup)
	checked := openAPICheck(tb, s.cfg.BasePath, s)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		checked.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	if o.listener != nil {
		ln = o.listener(ln)
	}
	srv.Listener = s.Listener(srv.Config, ln) // the connection limiter, as the agent serves it
	baseCtx, cancelBase := context.WithCancel(o.base)
	srv.Config.BaseContext = func(net.Listener) context.Context { return baseCtx }
	if o.http != nil {
		o.http(srv.Config)
	}
	srv.Start()
	return srv, cancelBase, handlers
}

// loopback returns a listener on a free loopback port.
func loopback(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	return ln
}

// proxyAddr is the address of the TCP proxy that newTestServer serves for
// s, if the test set no Config.ProxyPort of its own.
func proxyAddr(s *Server) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cfg.ProxyPort)) }

// request sends a request with the test secret; body is JSON-encoded
// unless it is nil, a string or []byte (sent as is).
func request(t *testing.T, ts *httptest.Server, method, path string, body any) *http.Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// call sends a request with the test secret and decodes the JSON reply,
// checking that it is labelled as JSON.
func call(t *testing.T, ts *httptest.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	resp := request(t, ts, method, path, body)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}
