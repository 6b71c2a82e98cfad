package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/terminals"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
)

const testSecret = "test-secret"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestServer starts the API on a loopback listener with default
// settings and a static secret; everything is closed when the test ends.
func newTestServer(t *testing.T) (*httptest.Server, *Server) {
	t.Helper()
	return newTestServerWith(t, Config{}, &executor.Runner{DrainDelay: 500 * time.Millisecond}, procs.Options{})
}

func newTestServerWith(t testing.TB, cfg Config, runner *executor.Runner, opts procs.Options) (*httptest.Server, *Server) {
	t.Helper()
	return newTestServerAll(t, cfg, runner, opts, terminals.Options{}, &tunnels.Registry{})
}

// newTestServerTunnels is newTestServerWith with tuns for tunnels. Each of
// configure is called with the http.Server before it starts.
func newTestServerTunnels(t testing.TB, cfg Config, runner *executor.Runner, opts procs.Options, tuns *tunnels.Registry,
	configure ...func(*http.Server)) (*httptest.Server, *Server) {
	t.Helper()
	return newTestServerAll(t, cfg, runner, opts, terminals.Options{}, tuns, configure...)
}

// newTestServerAll starts the API with every option. The test server's
// own port is added to tuns.Reserved, as the agent reserves its API port.
func newTestServerAll(t testing.TB, cfg Config, runner *executor.Runner, opts procs.Options, topts terminals.Options,
	tuns *tunnels.Registry, configure ...func(*http.Server)) (*httptest.Server, *Server) {
	t.Helper()
	auth, err := NewStaticAuth(testSecret)
	require.NoError(t, err)
	reg := procs.NewRegistry(runner, opts)
	terms := terminals.NewRegistry(runner, topts)
	fwd := &proxy.Forwarder{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tuns.Reserved = append(tuns.Reserved, ln.Addr().(*net.TCPAddr).Port)
	s := New(zerolog.Nop(), auth, Deps{Runner: runner, Procs: reg, Forwarder: fwd, Terminals: terms,
		Sessions: newTestSessions(t, runner), Tunnels: tuns}, cfg)
	// Every request and reply is checked against openapi.yaml.
	ts := httptest.NewUnstartedServer(openAPICheck(t, s.cfg.BasePath, s))
	ts.Listener.Close()
	ts.Listener = s.Listener(ts.Config, ln) // as the agent serves it
	for _, f := range configure {
		f(ts.Config)
	}
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, tuns.Close(ctx))
		require.NoError(t, s.Close(ctx))
		require.NoError(t, terms.Close(ctx))
		require.NoError(t, reg.Close(ctx))
		require.NoError(t, fwd.Close(ctx))
	})
	return ts, s
}

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

func newTestServerForBench(b *testing.B) (*httptest.Server, *Server) {
	return newTestServerWith(b, Config{}, &executor.Runner{}, procs.Options{})
}
