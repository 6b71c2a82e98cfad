package server

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/proxy"
)

// agentPorts is an API server and a TCP proxy on loopback ports, wired
// as the agent wires them, except that the Forwarder is given no
// Reserved ports: what is checked here is the HTTP layer's own refusal.
type agentPorts struct {
	ts        *httptest.Server
	fwd       *proxy.Forwarder
	apiPort   int
	proxyPort int
	proxyAddr string
}

func startAgentPorts(t *testing.T) *agentPorts {
	t.Helper()
	ts, s := newTestServer(t, testServer{runner: &executor.Runner{}})
	return &agentPorts{ts: ts, fwd: s.fwd, apiPort: s.cfg.APIPort, proxyPort: s.cfg.ProxyPort, proxyAddr: proxyAddr(s)}
}

func openFDs(t *testing.T) int {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(names)
}

// requireProxyClosesWithoutLoop makes one connection to the proxy and
// requires that it is closed at once (nothing is bound) and that the
// process's descriptors do not multiply meanwhile, as they do when the
// proxy forwards to itself. At the first sign of a loop it unbinds,
// which ends the loop, and fails: the check is bounded.
func requireProxyClosesWithoutLoop(t *testing.T, a *agentPorts) {
	t.Helper()
	before := openFDs(t)
	c, err := net.DialTimeout("tcp", a.proxyAddr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	closed := make(chan error, 1)
	go func() { // ends when c is closed, by the proxy or by the deferred Close
		_, err := io.Copy(io.Discard, c)
		closed <- err
	}()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-closed:
			assert.NoError(t, err)
			return
		case <-tick.C:
			if n := openFDs(t); n > before+200 {
				a.fwd.Unbind()
				t.Fatalf("connection loop: %d descriptors open after one connection, %d before", n, before)
			}
		case <-deadline:
			a.fwd.Unbind()
			t.Fatal("the proxy neither closed the connection nor looped")
		}
	}
}

// TestBindAgentPortsRefused is the regression test for the proxy bound
// to itself: one connection to it, from anyone, looped until every
// descriptor was gone. The API's port is refused as well.
func TestBindAgentPortsRefused(t *testing.T) {
	a := startAgentPorts(t)
	for _, tt := range []struct {
		port any
		want string
	}{
		{a.proxyPort, "TCP proxy port"},
		{strconv.Itoa(a.proxyPort), "TCP proxy port"},
		{a.apiPort, "API port"},
		{strconv.Itoa(a.apiPort), "API port"},
	} {
		code, body := call(t, a.ts, "POST", "/bind_port", map[string]any{"port": tt.port})
		assert.Equal(t, http.StatusBadRequest, code, "port %v", tt.port)
		assert.Contains(t, body["error"], tt.want, "port %v", tt.port)
		_, body = call(t, a.ts, "GET", "/port_status", nil)
		assert.Equal(t, "", body["port"], "port %v was bound", tt.port)
		requireProxyClosesWithoutLoop(t, a)
		a.fwd.Unbind()
	}
}

// TestBindPortForwarderRefusal checks that the Forwarder's own refusal
// (its Reserved ports) is a 400 too, not a 500 that clients retry.
func TestBindPortForwarderRefusal(t *testing.T) {
	ts, _ := newTestServer(t, testServer{setup: func(s *Server) {
		s.fwd.Reserved = []int{4444} // before any Bind or Serve, as documented
	}})
	code, body := call(t, ts, "POST", "/bind_port", map[string]any{"port": 4444})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body["error"], "reserved")
}

// TestBindPortSpelling: a port is plain decimal digits, as a JSON number
// or a string; anything a parser might read some other way is refused.
func TestBindPortSpelling(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	for _, body := range []string{
		`{"port": " 8080"}`, `{"port": "8080 "}`, `{"port": "\t8080"}`, `{"port": "08080"}`,
		`{"port": "+80"}`, `{"port": "-80"}`, `{"port": "8080.0"}`, `{"port": "8e3"}`,
		`{"port": "0x1f90"}`, `{"port": "８０８０"}`, `{"port": "80 80"}`, `{"port": "0"}`,
		`{"port": "00"}`, `{"port": "65536"}`, `{"port": "999999999999999999999"}`,
		`{"port": 8080.0}`, `{"port": 8e3}`, `{"port": -80}`, `{"port": 0}`, `{"port": 65536}`,
	} {
		code, reply := call(t, ts, "POST", "/bind_port", body)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, reply["error"], "between 1 and 65535, in plain decimal digits", body)
		_, bound := s.fwd.Port()
		assert.False(t, bound, body)
	}
	for _, body := range []string{`{}`, `{"port": null}`, `{"port": ""}`} {
		code, reply := call(t, ts, "POST", "/bind_port", body)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Equal(t, "port is required", reply["error"], body)
	}
	for _, body := range []string{`{"port": true}`, `{"port": [8080]}`, `{"port": {"n": 8080}}`} {
		code, reply := call(t, ts, "POST", "/bind_port", body)
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, reply["error"], `field "port" must be a string or a number`, body)
	}
	for _, tt := range []struct {
		body string
		port int
	}{
		{`{"port": 8080}`, 8080}, {`{"port": "8080"}`, 8080}, {`{"port": "1"}`, 1}, {`{"port": 65535}`, 65535},
	} {
		code, reply := call(t, ts, "POST", "/bind_port", tt.body)
		assert.Equal(t, http.StatusOK, code, tt.body)
		assert.Equal(t, strconv.Itoa(tt.port), reply["port"], tt.body)
		port, _ := s.fwd.Port()
		assert.Equal(t, tt.port, port, tt.body)
		s.fwd.Unbind()
	}
}
