package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/server"
)

// agentEnv, set to 1, makes the test binary run as the agent itself: see
// execAgent.
const agentEnv = "SANDBOX_EXECUTOR_TEST_AS_AGENT"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == executor.HelperArg {
		executor.RunHelper(os.Args[2:]) // the test binary is the agent's binary here
	}
	if os.Getenv(agentEnv) == "1" {
		main() // exits on error
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const testSecret = "s3cret-token"

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// testAgent is an agent started by startAgent on loopback ports.
type testAgent struct {
	api, proxy net.Addr
	stderr     *testutil.SyncBuffer
	stdout     *testutil.SyncBuffer
	cancel     context.CancelFunc
	errc       chan error // receives run's result once
	client     *http.Client
}

// startAgent runs the agent with env, the loopback addresses and args
// until the test ends. o's ready and stdout are set here.
func startAgent(t *testing.T, env map[string]string, o options, args ...string) *testAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &testAgent{stderr: &testutil.SyncBuffer{}, stdout: &testutil.SyncBuffer{}, cancel: cancel, errc: make(chan error, 1),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	addrs := make(chan [2]net.Addr, 1)
	o.ready = func(api, proxy net.Addr) { addrs <- [2]net.Addr{api, proxy} }
	o.stdout = a.stdout
	o.memoryLimit = func(int64) int64 { return 0 } // the test process keeps its own
	args = append([]string{"-addr", "127.0.0.1:0", "-proxy-addr", "127.0.0.1:0"}, args...)
	go func() { a.errc <- o.run(ctx, args, getenv(env), a.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-a.errc:
		case <-time.After(10 * time.Second):
			t.Error("run did not return after the test")
		}
	})
	select {
	case got := <-addrs:
		a.api, a.proxy = got[0], got[1]
	case err := <-a.errc:
		a.errc <- err // for the cleanup
		t.Fatalf("run returned before listening: %v\nlog:\n%s", err, a.stderr)
	case <-time.After(5 * time.Second):
		t.Fatalf("the agent did not listen within 5 s\nlog:\n%s", a.stderr)
	}
	return a
}

// stop cancels the agent's ctx and returns how long run took to return,
// and its result.
func (a *testAgent) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	a.cancel()
	err := a.result(t)
	return time.Since(start), err
}

// result waits for run's result and leaves a copy for the cleanup.
func (a *testAgent) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-a.errc:
		a.errc <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10 s")
		return nil
	}
}

// newClient returns a client of the agent with token (none if empty),
// and what it sends goes through a.client.
func (a *testAgent) newClient(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New("http://"+a.api.String(), token, client.WithHTTPClient(a.client))
	require.NoError(t, err)
	return c
}

// requireStatus asserts that err is the agent's refusal with status code.
func requireStatus(t *testing.T, code int, err error, msgAndArgs ...any) {
	t.Helper()
	var ae *client.Error
	require.ErrorAs(t, err, &ae, msgAndArgs...)
	assert.Equal(t, code, ae.StatusCode, msgAndArgs...)
}

// do sends a request with the given bearer token (none if empty) and
// returns the status and body, for what the client does not send.
func (a *testAgent) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.api.String()+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			assert.Equal(t, ":3030", c.apiAddr)
			assert.Equal(t, ":3031", c.proxyAddr)
			assert.Equal(t, authStatic, c.authMode)
			assert.Equal(t, defaultSecretPath, c.secretPath)
			assert.Equal(t, zerolog.InfoLevel, c.logLevel)
			assert.Equal(t, 15*time.Second, c.keepAlive)
			assert.Equal(t, 60*time.Second, c.stall)
			assert.Equal(t, 30*time.Second, c.bodyTime)
			assert.Equal(t, 10*time.Second, c.unauthTime)
			assert.Zero(t, c.maxConns)
			assert.Zero(t, c.maxTunnels)
			assert.False(t, c.trustFwdHost)
			assert.Empty(t, c.secret)
			assert.Nil(t, c.command)
		}},
		{name: "SANDBOX_PORT wins over PORT",
			env: map[string]string{"SANDBOX_PORT": "4000", "PORT": "8080", "SANDBOX_PROXY_PORT": "4001", "PROXY_PORT": "8081"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, ":4000", c.apiAddr)
				assert.Equal(t, ":4001", c.proxyAddr)
			}},
		{name: "PORT alone, as older deployments set it",
			env: map[string]string{"PORT": "8080", "PROXY_PORT": "8081"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, ":8080", c.apiAddr)
				assert.Equal(t, ":8081", c.proxyAddr)
			}},
		{name: "empty variable counts as unset",
			env:   map[string]string{"SANDBOX_PORT": "", "PORT": "8080"},
			check: func(t *testing.T, c config) { assert.Equal(t, ":8080", c.apiAddr) }},
		{name: "flag wins over env",
			args: []string{"-port", "5000", "-proxy-port", "5001", "-secret", "flag", "-log-level", "warn"},
			env:  map[string]string{"SANDBOX_PORT": "4000", "SANDBOX_PROXY_PORT": "4001", "SANDBOX_SECRET": "env", "LOG_LEVEL": "debug"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, ":5000", c.apiAddr)
				assert.Equal(t, ":5001", c.proxyAddr)
				assert.Equal(t, "flag", c.secret)
				assert.Equal(t, zerolog.WarnLevel, c.logLevel)
			}},
		{name: "addr overrides port flag and env",
			args: []string{"-addr", "127.0.0.1:0", "-port", "5000", "-proxy-addr", "[::1]:7"},
			env:  map[string]string{"SANDBOX_PORT": "4000"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, "127.0.0.1:0", c.apiAddr)
				assert.Equal(t, "[::1]:7", c.proxyAddr)
			}},
		{name: "env settings",
			env: map[string]string{"SANDBOX_SECRET": "abc", "LOG_LEVEL": "TRACE", "BASE_PATH": "/koyeb-sandbox",
				"SSE_KEEPALIVE": "10s", "SSE_STALL_TIMEOUT": "2m", "SANDBOX_AUTH_MODE": "Static"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, "abc", c.secret)
				assert.Equal(t, zerolog.TraceLevel, c.logLevel)
				assert.Equal(t, "/koyeb-sandbox", c.basePath)
				assert.Equal(t, 10*time.Second, c.keepAlive)
				assert.Equal(t, 2*time.Minute, c.stall)
				assert.Equal(t, authStatic, c.authMode)
			}},
		{name: "connection limits from env",
			env: map[string]string{"SANDBOX_BODY_TIMEOUT": "5s", "SANDBOX_UNAUTH_TIMEOUT": "2s", "SANDBOX_MAX_CONNS": "100"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 5*time.Second, c.bodyTime)
				assert.Equal(t, 2*time.Second, c.unauthTime)
				assert.Equal(t, 100, c.maxConns)
			}},
		{name: "connection limits, flags win",
			args: []string{"-body-timeout", "1m", "-unauth-timeout", "3s", "-max-conns", "7"},
			env:  map[string]string{"SANDBOX_BODY_TIMEOUT": "5s", "SANDBOX_UNAUTH_TIMEOUT": "2s", "SANDBOX_MAX_CONNS": "100"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, time.Minute, c.bodyTime)
				assert.Equal(t, 3*time.Second, c.unauthTime)
				assert.Equal(t, 7, c.maxConns)
			}},
		{name: "bad body timeout", env: map[string]string{"SANDBOX_BODY_TIMEOUT": "-1s"},
			wantErr: `invalid body-timeout "-1s" (from SANDBOX_BODY_TIMEOUT)`},
		{name: "bad unauth timeout", args: []string{"-unauth-timeout", "soon"},
			wantErr: `invalid unauth-timeout "soon" (from -unauth-timeout)`},
		{name: "bad max conns", env: map[string]string{"SANDBOX_MAX_CONNS": "-5"},
			wantErr: `invalid max-conns "-5" (from SANDBOX_MAX_CONNS)`},
		{name: "command limits from env",
			env: map[string]string{"SANDBOX_MAX_COMMANDS": "300", "SANDBOX_MAX_PROCESSES": "200", "SANDBOX_LOG_BUDGET": "64MiB"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 300, c.maxCmds)
				assert.Equal(t, 200, c.maxProcs)
				assert.Equal(t, 64<<20, c.logBudget)
			}},
		{name: "command limits, flags win",
			args: []string{"-max-commands", "3", "-max-processes", "2", "-log-budget", "1g"},
			env:  map[string]string{"SANDBOX_MAX_COMMANDS": "300", "SANDBOX_MAX_PROCESSES": "200", "SANDBOX_LOG_BUDGET": "64MiB"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 3, c.maxCmds)
				assert.Equal(t, 2, c.maxProcs)
				assert.Equal(t, 1<<30, c.logBudget)
			}},
		{name: "max contexts from env", env: map[string]string{"SANDBOX_MAX_CONTEXTS": "24"},
			check: func(t *testing.T, c config) { assert.Equal(t, 24, c.maxContexts) }},
		{name: "max contexts, the flag wins", args: []string{"-max-contexts", "3"}, env: map[string]string{"SANDBOX_MAX_CONTEXTS": "24"},
			check: func(t *testing.T, c config) { assert.Equal(t, 3, c.maxContexts) }},
		{name: "bad max contexts", env: map[string]string{"SANDBOX_MAX_CONTEXTS": "lots"},
			wantErr: `invalid max-contexts "lots" (from SANDBOX_MAX_CONTEXTS)`},
		{name: "bad max commands", args: []string{"-max-commands", "many"},
			wantErr: `invalid max-commands "many" (from -max-commands)`},
		{name: "bad log budget", env: map[string]string{"SANDBOX_LOG_BUDGET": "64 parsecs"},
			wantErr: `invalid log-budget "64 parsecs" (from SANDBOX_LOG_BUDGET)`},
		{name: "input and session env budgets from env",
			env: map[string]string{"SANDBOX_INPUT_BUDGET": "512MiB", "SANDBOX_SESSION_ENV_BUDGET": "1GiB"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 512<<20, c.inputBudget)
				assert.Equal(t, 1<<30, c.envBudget)
			}},
		{name: "input and session env budgets, flags win",
			args: []string{"-input-budget", "1m", "-session-env-budget", "2m"},
			env:  map[string]string{"SANDBOX_INPUT_BUDGET": "512MiB", "SANDBOX_SESSION_ENV_BUDGET": "1GiB"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 1<<20, c.inputBudget)
				assert.Equal(t, 2<<20, c.envBudget)
			}},
		{name: "bad input budget", env: map[string]string{"SANDBOX_INPUT_BUDGET": "some"},
			wantErr: `invalid input-budget "some" (from SANDBOX_INPUT_BUDGET)`},
		{name: "bad session env budget", args: []string{"-session-env-budget", "-1"},
			wantErr: `invalid session-env-budget "-1" (from -session-env-budget)`},
		{name: "no upload limit by default",
			check: func(t *testing.T, c config) { assert.Equal(t, 0, c.maxUpload) }},
		{name: "upload limit from env", env: map[string]string{"SANDBOX_MAX_UPLOAD": "2GiB"},
			check: func(t *testing.T, c config) { assert.Equal(t, 2<<30, c.maxUpload) }},
		{name: "upload limit, flag wins", args: []string{"-max-upload", "1048576"}, env: map[string]string{"SANDBOX_MAX_UPLOAD": "2GiB"},
			check: func(t *testing.T, c config) { assert.Equal(t, 1<<20, c.maxUpload) }},
		{name: "bad upload limit", env: map[string]string{"SANDBOX_MAX_UPLOAD": "lots"},
			wantErr: `invalid max-upload "lots" (from SANDBOX_MAX_UPLOAD)`},
		{name: "extraction limits by default",
			check: func(t *testing.T, c config) {
				assert.Equal(t, 0, c.extractMax)
				assert.Equal(t, 30*time.Minute, c.extractTime)
			}},
		{name: "extraction limits from env", env: map[string]string{"SANDBOX_EXTRACT_MAX_ENTRIES": "5000", "SANDBOX_EXTRACT_TIMEOUT": "2m"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 5000, c.extractMax)
				assert.Equal(t, 2*time.Minute, c.extractTime)
			}},
		{name: "bad extraction timeout", args: []string{"-extract-timeout", "0"},
			wantErr: `invalid extract-timeout "0" (from -extract-timeout): want a positive duration such as 30m`},
		{name: "pool mode",
			env: map[string]string{"SANDBOX_AUTH_MODE": "POOL", "SANDBOX_SECRET_PATH": "/tmp/x/secret"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, authPool, c.authMode)
				assert.Equal(t, "/tmp/x/secret", c.secretPath)
			}},
		{name: "base path with a trailing slash",
			args:  []string{"-base-path", "/koyeb-sandbox/"},
			check: func(t *testing.T, c config) { assert.Equal(t, "/koyeb-sandbox", c.basePath) }},
		{name: "base path of several segments",
			env:   map[string]string{"BASE_PATH": "/a/b-c_d.e~f:g@h"},
			check: func(t *testing.T, c config) { assert.Equal(t, "/a/b-c_d.e~f:g@h", c.basePath) }},
		{name: "base path / is none",
			env:   map[string]string{"BASE_PATH": "/"},
			check: func(t *testing.T, c config) { assert.Empty(t, c.basePath) }},
		{name: "base path without a leading slash", env: map[string]string{"BASE_PATH": "koyeb-sandbox"},
			wantErr: `invalid base path "koyeb-sandbox" (from BASE_PATH): it must start with "/"`},
		{name: "base path with a space", args: []string{"-base-path", "/my sandbox"},
			wantErr: `invalid base path "/my sandbox" (from -base-path): ' ' is not allowed in it`},
		{name: "base path with a query", env: map[string]string{"BASE_PATH": "/a?b"},
			wantErr: `'?' is not allowed`},
		{name: "base path with an escape", env: map[string]string{"BASE_PATH": "/a%20b"},
			wantErr: `'%' is not allowed`},
		{name: "base path with an empty segment", env: map[string]string{"BASE_PATH": "/a//b"},
			wantErr: "empty segment"},
		{name: "base path with a dot-dot segment", env: map[string]string{"BASE_PATH": "/a/../b"},
			wantErr: `".." segment`},
		{name: "main command after the first --",
			args: []string{"-secret", "x", "--", "sh", "-c", "echo -- hi", "--"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, []string{"sh", "-c", "echo -- hi", "--"}, c.command)
			}},
		{name: "-- alone means no command",
			args:  []string{"--"},
			check: func(t *testing.T, c config) { assert.Nil(t, c.command) }},
		{name: "pool with a secret", env: map[string]string{"SANDBOX_AUTH_MODE": "pool", "SANDBOX_SECRET": "x"},
			wantErr: "SANDBOX_SECRET cannot be set when SANDBOX_AUTH_MODE=pool"},
		{name: "unknown auth mode", env: map[string]string{"SANDBOX_AUTH_MODE": "oauth"},
			wantErr: `unsupported SANDBOX_AUTH_MODE "oauth"`},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "verbose"},
			wantErr: `invalid log level "verbose" (from LOG_LEVEL)`},
		{name: "bad port", env: map[string]string{"SANDBOX_PORT": "70000"},
			wantErr: `invalid port "70000" (from SANDBOX_PORT)`},
		{name: "bad proxy port flag", args: []string{"-proxy-port", "x"},
			wantErr: `invalid port "x" (from -proxy-port)`},
		{name: "bad keepalive", env: map[string]string{"SSE_KEEPALIVE": "15"},
			wantErr: `invalid keepalive "15" (from SSE_KEEPALIVE)`},
		{name: "bad stall timeout", args: []string{"-stall-timeout", "0s"},
			wantErr: `invalid stall-timeout "0s" (from -stall-timeout)`},
		{name: "log format and open metrics from env",
			env: map[string]string{"LOG_FORMAT": "Console", "SANDBOX_METRICS_OPEN": "1"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, logConsole, c.logFormat)
				assert.True(t, c.metricsOpen)
			}},
		{name: "log format and open metrics, flags win",
			args: []string{"-log-format", "json", "-metrics-open"},
			env:  map[string]string{"LOG_FORMAT": "console", "SANDBOX_METRICS_OPEN": "false"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, logJSON, c.logFormat)
				assert.True(t, c.metricsOpen)
			}},
		{name: "log format and metrics closed by default",
			check: func(t *testing.T, c config) {
				assert.Equal(t, logJSON, c.logFormat)
				assert.False(t, c.metricsOpen)
			}},
		{name: "bad log format", env: map[string]string{"LOG_FORMAT": "xml"},
			wantErr: `invalid log format "xml" (from LOG_FORMAT): want json or console`},
		{name: "bad metrics-open", env: map[string]string{"SANDBOX_METRICS_OPEN": "maybe"},
			wantErr: `invalid metrics-open "maybe" (from SANDBOX_METRICS_OPEN)`},
		{name: "tunnels and forwarded host", args: []string{"-max-tunnels", "7"},
			env: map[string]string{"SANDBOX_TRUST_FORWARDED_HOST": "TRUE"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 7, c.maxTunnels)
				assert.True(t, c.trustFwdHost)
			}},
		{name: "bad trust-forwarded-host", env: map[string]string{"SANDBOX_TRUST_FORWARDED_HOST": "maybe"},
			wantErr: `invalid trust-forwarded-host "maybe" (from SANDBOX_TRUST_FORWARDED_HOST): want true or false`},
		{name: "bad max-tunnels", args: []string{"-max-tunnels", "-1"},
			wantErr: `invalid max-tunnels "-1" (from -max-tunnels)`},
		{name: "mcp on by default, every tool",
			check: func(t *testing.T, c config) {
				assert.Equal(t, server.MCPConfig{}, c.mcp)
			}},
		{name: "mcp settings", args: []string{"-mcp-tools", "read_file, list_dir"},
			env: map[string]string{"SANDBOX_MCP": "false", "SANDBOX_MCP_ORIGINS": "https://ide.example.com"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, server.MCPConfig{Off: true, Tools: []string{"read_file", "list_dir"},
					Origins: []string{"https://ide.example.com"}}, c.mcp)
			}},
		{name: "unknown mcp tool", args: []string{"-mcp-tools", "read_file,rm_rf"},
			wantErr: `-mcp-tools: unknown MCP tool "rm_rf"`},
		{name: "watches", args: []string{"-max-watches", "3"}, env: map[string]string{"SANDBOX_MAX_WATCHED_DIRS": "100"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 3, c.maxWatches)
				assert.Equal(t, 100, c.maxWatchDirs)
			}},
		{name: "bad max-watches", args: []string{"-max-watches", "x"},
			wantErr: `invalid max-watches "x" (from -max-watches)`},
		{name: "stray argument", args: []string{"sh"},
			wantErr: `unexpected argument "sh": the main command goes after --`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, getenv(tt.env), io.Discard)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestParseConfigFlagErrors(t *testing.T) {
	var out bytes.Buffer
	_, err := parseConfig([]string{"-h"}, getenv(nil), &out)
	assert.Equal(t, exitCodeError{0}, err)
	assert.Contains(t, out.String(), "SANDBOX_PORT, then PORT")
	for _, env := range []string{"SANDBOX_BODY_TIMEOUT", "SANDBOX_UNAUTH_TIMEOUT", "SANDBOX_MAX_CONNS",
		"SANDBOX_MAX_COMMANDS", "SANDBOX_MAX_PROCESSES", "SANDBOX_LOG_BUDGET", "LOG_FORMAT", "SANDBOX_METRICS_OPEN",
		"SANDBOX_MAX_UPLOAD", "SANDBOX_INPUT_BUDGET", "SANDBOX_SESSION_ENV_BUDGET"} {
		assert.Contains(t, out.String(), env)
	}
	assert.Contains(t, out.String(), "-input-budget size")
	assert.Contains(t, out.String(), "-session-env-budget size")

	_, err = parseConfig([]string{"-no-such-flag"}, getenv(nil), io.Discard)
	assert.Equal(t, exitCodeError{2}, err)
}

func TestRunConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"missing secret", nil, []string{"SANDBOX_SECRET"}},
		{"bad log level", map[string]string{"SANDBOX_SECRET": "x", "LOG_LEVEL": "loud"}, []string{`"loud"`, "LOG_LEVEL"}},
		{"pool with a secret", map[string]string{"SANDBOX_SECRET": "x", "SANDBOX_AUTH_MODE": "pool"},
			[]string{"SANDBOX_SECRET cannot be set when SANDBOX_AUTH_MODE=pool"}},
		// /proc takes no new files, not even from root.
		{"pool with a secret path it cannot write", map[string]string{"SANDBOX_AUTH_MODE": "pool",
			"SANDBOX_SECRET_PATH": "/proc/sandbox-secret"}, []string{"cannot save the claimed secret", "SANDBOX_SECRET_PATH"}},
		{"base path without a leading slash", map[string]string{"SANDBOX_SECRET": "x", "BASE_PATH": "koyeb-sandbox"},
			[]string{"invalid base path", "BASE_PATH"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Bounded: an agent that accepted the setting would serve
			// until its context ends, and then return no error.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, []string{"-addr", "127.0.0.1:0", "-proxy-addr", "127.0.0.1:0"},
				getenv(tt.env), io.Discard)
			require.Error(t, err)
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var out testutil.SyncBuffer
	err := options{stdout: &out}.run(context.Background(), []string{"-version"},
		getenv(map[string]string{"LOG_LEVEL": "bad"}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "sandbox-executor dev\n", out.String())
}

func TestHealthAndAuth(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})

	health, err := a.newClient(t, "").Health(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ok", health.Status)
	assert.Equal(t, version, health.Version)
	assert.Equal(t, a.proxy.(*net.TCPAddr).Port, health.ProxyPort, "the actual proxy port, not 0")

	_, err = a.newClient(t, "").ListProcesses(t.Context())
	requireStatus(t, http.StatusUnauthorized, err)
	_, err = a.newClient(t, "wrong").ListProcesses(t.Context())
	requireStatus(t, http.StatusUnauthorized, err)
	_, err = a.newClient(t, testSecret).ListProcesses(t.Context())
	assert.NoError(t, err)

	log := a.stderr.String()
	assert.Contains(t, log, `"message":"listening"`)
	assert.Contains(t, log, `"api":"`+a.api.String()+`"`)
	assert.Contains(t, log, `"proxy":"`+a.proxy.String()+`"`)
	assert.Contains(t, log, `"auth_mode":"static"`)
	assert.NotContains(t, log, testSecret)

	took, err := a.stop(t)
	assert.NoError(t, err)
	assert.Less(t, took, 5*time.Second)
}

func TestBasePathAndProxy(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret, "BASE_PATH": "/koyeb-sandbox"}, options{})
	prefixed, err := client.New("http://"+a.api.String()+"/koyeb-sandbox", testSecret, client.WithHTTPClient(a.client))
	require.NoError(t, err)
	_, err = prefixed.Health(t.Context())
	assert.NoError(t, err)

	// The proxy listener is served: with no port bound it accepts and
	// closes, so a read ends without data.
	c, err := net.DialTimeout("tcp", a.proxy.String(), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := c.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.Error(t, err)
}

func TestPoolMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "sandbox-secret")
	env := map[string]string{"SANDBOX_AUTH_MODE": "pool", "SANDBOX_SECRET_PATH": path}

	a := startAgent(t, env, options{})
	assert.Contains(t, a.stderr.String(), `"auth_mode":"pool"`)
	_, err := a.newClient(t, "").ListProcesses(t.Context())
	requireStatus(t, http.StatusUnauthorized, err, "no token claims nothing")
	_, err = a.newClient(t, "abc").ListProcesses(t.Context())
	require.NoError(t, err, "the first token claims the sandbox")
	assert.Contains(t, a.stderr.String(), `"message":"pool sandbox claimed"`)
	_, err = a.newClient(t, "other").ListProcesses(t.Context())
	requireStatus(t, http.StatusUnauthorized, err)
	_, err = a.newClient(t, "abc").ListProcesses(t.Context())
	assert.NoError(t, err)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(b))
	_, err = a.stop(t)
	require.NoError(t, err)

	// A restarted agent keeps the claim.
	b2 := startAgent(t, env, options{})
	assert.Contains(t, b2.stderr.String(), `"claimed":true`)
	_, err = b2.newClient(t, "other").ListProcesses(t.Context())
	requireStatus(t, http.StatusUnauthorized, err)
	_, err = b2.newClient(t, "abc").ListProcesses(t.Context())
	assert.NoError(t, err)
}

func TestShutdownKillsBackgroundProcesses(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	started, err := a.newClient(t, testSecret).StartProcess(t.Context(), client.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	require.True(t, testutil.Alive(started.PID))

	took, err := a.stop(t)
	assert.NoError(t, err)
	assert.Less(t, took, 5*time.Second)
	assert.False(t, testutil.Alive(started.PID), "the background process outlived the agent")
}

// Shutdown kills every process of a terminal's session, a job in a
// process group of its own included.
func TestShutdownKillsTerminals(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	started, err := a.newClient(t, testSecret).StartTerminal(t.Context(),
		client.TerminalOptions{Cmd: "set -m; sh -c 'echo $$ >" + pidFile + "; exec sleep 100' & wait"})
	require.NoError(t, err)
	var job int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		job, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && job > 0
	}, 5*time.Second, 10*time.Millisecond)
	pgid, err := syscall.Getpgid(job)
	require.NoError(t, err)
	require.NotEqual(t, started.PID, pgid, "the job is in a group of its own")

	_, err = a.stop(t)
	assert.NoError(t, err)
	assertDies(t, started.PID, "the terminal outlived the agent")
	assertDies(t, job, "a job of the terminal outlived the agent")
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"256MiB", 256 << 20, true}, {"256 MiB", 256 << 20, true},
		{"2k", 2 << 10, true}, {"1GB", 1 << 30, true}, {" 12b ", 12, true},
		{"", 0, false}, {"MiB", 0, false}, {"-1", 0, false}, {"1.5GiB", 0, false}, {"1TiB", 0, false},
		{"99999999999999999999", 0, false}, {"9999999999999G", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseSize(tt.in)
		assert.Equal(t, tt.ok, ok, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

// The runtime gets a soft memory limit of twice the log budget plus
// headroom, unless GOMEMLIMIT is set.
func TestMemoryLimit(t *testing.T) {
	var got []int64
	o := options{memoryLimit: func(n int64) int64 { got = append(got, n); return 0 }}
	o.setMemoryLimit(zerolog.Nop(), getenv(nil), 64<<20)
	assert.Equal(t, []int64{2*64<<20 + memoryHeadroom}, got)
	o.setMemoryLimit(zerolog.Nop(), getenv(map[string]string{"GOMEMLIMIT": "1GiB"}), 64<<20)
	assert.Len(t, got, 1, "GOMEMLIMIT wins")
}

// The agent's own ports reach the forwarder as reserved: bind_port of
// either is refused, through the wiring in run.
func TestBindOwnPortsRefused(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	c := a.newClient(t, testSecret)
	for _, addr := range []net.Addr{a.api, a.proxy} {
		_, err := c.BindPort(t.Context(), addr.(*net.TCPAddr).Port)
		requireStatus(t, http.StatusBadRequest, err, addr)
	}
}

// Shutdown kills what a finished /run command left in its group: a
// background child that would otherwise outlive the agent.
func TestShutdownKillsWhatRunLeft(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	out, err := a.newClient(t, testSecret).Run(t.Context(), client.Command{Cmd: "sleep 100 >/dev/null 2>&1 & echo $!"})
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(out.Stdout))
	require.NoError(t, err)
	require.True(t, testutil.Alive(pid))

	_, err = a.stop(t)
	assert.NoError(t, err)
	assertDies(t, pid, "what a /run command left in its group outlived the agent")
}

func TestShutdownEndsRunInFlight(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := a.newClient(t, testSecret)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The answer does not matter: only that the request ends.
		_, _ = c.Run(context.Background(), client.Command{Cmd: "echo $$ > " + pidFile + "; sleep 100; true"})
	}()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, 5*time.Second, 10*time.Millisecond)

	took, err := a.stop(t)
	assert.NoError(t, err)
	// Without the base context the request would be cut only when the
	// graceful shutdown gives up, after httpShutdownTimeout.
	assert.Less(t, took, httpShutdownTimeout-time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the /run request did not end at shutdown")
	}
	assert.False(t, testutil.Alive(pid), "the /run command outlived the agent")
}

func TestMainCommandExitCode(t *testing.T) {
	leftover := filepath.Join(t.TempDir(), "leftover")
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{},
		"--", "sh", "-c", "sleep 100 >/dev/null 2>&1 & echo $! > "+leftover+"; exit 7")
	start := time.Now()
	assert.Equal(t, exitCodeError{7}, a.result(t))
	assert.Less(t, time.Since(start), 5*time.Second)

	b, err := os.ReadFile(leftover)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assertDies(t, pid, "what the main command left in its group outlived the agent")
}

func TestMainCommandStartFailure(t *testing.T) {
	noLimit := options{memoryLimit: func(int64) int64 { return 0 }}
	err := noLimit.run(context.Background(),
		[]string{"-addr", "127.0.0.1:0", "-proxy-addr", "127.0.0.1:0", "--", "/no/such/command"},
		getenv(map[string]string{"SANDBOX_SECRET": testSecret}), io.Discard)
	require.Error(t, err)
	var exit exitCodeError
	assert.False(t, errors.As(err, &exit))
	assert.Contains(t, err.Error(), "/no/such/command")
}

// assertDies asserts that pid is gone within a second. A process that the
// agent killed but is not the parent of (a grandchild) dies a moment
// after kill(2) returns, and nobody the agent knows waits for it.
func assertDies(t *testing.T, pid int, msgAndArgs ...any) {
	t.Helper()
	assert.Eventually(t, func() bool { return !testutil.Alive(pid) }, time.Second, 5*time.Millisecond, msgAndArgs...)
}

// startMainCommand starts an agent whose main command is script, and waits
// until the script has printed "ready".
func startMainCommand(t *testing.T, o options, script string) *testAgent {
	t.Helper()
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, o, "--", "sh", "-c", script)
	require.Eventually(t, func() bool { return strings.Contains(a.stdout.String(), "ready") },
		5*time.Second, 10*time.Millisecond, "the main command did not start")
	return a
}

func TestMainCommandStopsOnTerm(t *testing.T) {
	// The background sleep's output goes to /dev/null so that it does not
	// hold the test's stdout pipe.
	a := startMainCommand(t, options{}, `trap "exit 3" TERM; echo ready; sleep 100 >/dev/null 2>&1 & wait`)
	took, err := a.stop(t)
	assert.Equal(t, exitCodeError{3}, err)
	assert.Less(t, took, 2*time.Second, "a command that exits on SIGTERM does not wait for the grace")
}

func TestMainCommandKilledAfterGrace(t *testing.T) {
	const grace = 500 * time.Millisecond
	dir := t.TempDir()
	script := `trap "" TERM; echo $$ > ` + dir + `/pid; sleep 100 >/dev/null 2>&1 & echo $! > ` + dir + `/child; echo ready; wait`
	a := startMainCommand(t, options{killGrace: grace}, script)
	pids := make([]int, 0, 2)
	for _, name := range []string{"pid", "child"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		pids = append(pids, pid)
	}

	took, err := a.stop(t)
	assert.Equal(t, exitCodeError{128 + 9}, err)
	assert.GreaterOrEqual(t, took, grace)
	assert.Less(t, took, grace+2*time.Second)
	for _, pid := range pids {
		assertDies(t, pid, "pid %d outlived the agent", pid)
	}
}

func TestMainCommandSignalForwarded(t *testing.T) {
	a := startMainCommand(t, options{}, `trap "exit 5" USR1; echo ready; sleep 100 >/dev/null 2>&1 & wait`)
	// run has registered for SIGUSR1 before starting the command, so this
	// does not take the signal's default action on the test binary.
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	assert.Equal(t, exitCodeError{5}, a.result(t))
}
