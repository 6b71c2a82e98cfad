package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

func TestChildEnviron(t *testing.T) {
	in := []string{"PATH=/bin", "SANDBOX_SECRET=x", "SANDBOX_SECRET_PATH=/s", "PORT=8080", "LOG_LEVEL=debug",
		"SANDBOX_SECRET_X=kept", "NOEQUALS", "SANDBOX_SECRET"}
	orig := slices.Clone(in)
	assert.Equal(t, []string{"PATH=/bin", "PORT=8080", "LOG_LEVEL=debug", "SANDBOX_SECRET_X=kept", "NOEQUALS"}, childEnviron(in))
	assert.Equal(t, orig, in, "the agent's own list is untouched")
}

// Every environment variable the agent's configuration reads is either a
// credential, which no child gets, or one that children keep. A new
// variable fails here until it is put on one side.
func TestEveryConfigVariableIsClassified(t *testing.T) {
	inherited := map[string]bool{
		"SANDBOX_AUTH_MODE": true, "SANDBOX_PORT": true, "PORT": true, "SANDBOX_PROXY_PORT": true, "PROXY_PORT": true,
		"LOG_LEVEL": true, "LOG_FORMAT": true, "SANDBOX_METRICS_OPEN": true, "BASE_PATH": true, "SSE_KEEPALIVE": true,
		"SSE_STALL_TIMEOUT": true, "SANDBOX_BODY_TIMEOUT": true, "SANDBOX_UNAUTH_TIMEOUT": true,
		"SANDBOX_MAX_CONNS": true, "SANDBOX_MAX_COMMANDS": true, "SANDBOX_MAX_PROCESSES": true,
		"SANDBOX_LOG_BUDGET": true, "SANDBOX_MAX_UPLOAD": true, "SANDBOX_MAX_TUNNELS": true,
		"SANDBOX_TRUST_FORWARDED_HOST": true, "SANDBOX_EXTRACT_MAX_ENTRIES": true, "SANDBOX_EXTRACT_TIMEOUT": true,
		"SANDBOX_INPUT_BUDGET": true, "SANDBOX_SESSION_ENV_BUDGET": true,
		"SANDBOX_MCP": true, "SANDBOX_MCP_TOOLS": true, "SANDBOX_MCP_ORIGINS": true,
		"SANDBOX_MAX_CONTEXTS": true,
		"SANDBOX_MAX_WATCHES":  true, "SANDBOX_MAX_WATCHED_DIRS": true,
		"SANDBOX_STATE_DIR": true, "SANDBOX_CHECKPOINT_BUDGET": true,
	}
	read := map[string]bool{}
	_, err := parseConfig(nil, func(k string) string { read[k] = true; return "" }, &bytes.Buffer{})
	require.NoError(t, err)
	require.Contains(t, read, "SANDBOX_SECRET")
	for name := range read {
		assert.True(t, isCredentialEnv(name) != inherited[name], "%s must be either a credential or inherited", name)
	}
	assert.True(t, isCredentialEnv("SANDBOX_SECRET"))
	assert.True(t, isCredentialEnv("SANDBOX_SECRET_PATH"))
}

// Every child used to inherit SANDBOX_SECRET, so a command run as
// nobody could read it and call /run as root. Here the agent is a real
// process started with the secret and its path in its environment; no
// child of any kind, as root or as nobody, has either, while PORT and
// LOG_LEVEL, which apps read, are still there.
func TestNoChildSeesTheSecret(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the children run as nobody too")
	}
	dir := t.TempDir()
	secretPath := filepath.Join(dir, "secret")
	mainEnv := filepath.Join(dir, "main.env")
	a := execAgent(t, "", []string{"SANDBOX_SECRET_PATH=" + secretPath, "PORT=8080"},
		"--", "/bin/sh", "-c", `tr '\0' '\n' </proc/$$/environ >"$0.tmp" && mv "$0.tmp" "$0" && exec sleep 1000`, mainEnv)
	c, err := client.New("http://"+a.addr, testSecret)
	require.NoError(t, err)
	ctx := t.Context()

	check := func(what, environ string) {
		t.Helper()
		var leaks []string
		for _, kv := range strings.Split(environ, "\n") {
			if strings.Contains(kv, testSecret) || strings.HasPrefix(kv, "SANDBOX_SECRET") || strings.Contains(kv, secretPath) {
				leaks = append(leaks, kv)
			}
		}
		assert.Empty(t, leaks, what)
		assert.Contains(t, strings.Split(environ, "\n"), "PORT=8080", what)
		assert.Contains(t, strings.Split(environ, "\n"), "LOG_LEVEL=info", what)
	}
	procEnviron := func(pid int) string {
		t.Helper()
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		require.NoError(t, err)
		return string(bytes.ReplaceAll(b, []byte{0}, []byte{'\n'}))
	}
	const shellEnv = `tr '\0' '\n' </proc/$$/environ`

	require.Eventually(t, func() bool { _, err := os.Stat(mainEnv); return err == nil }, 10*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(mainEnv)
	require.NoError(t, err)
	check("the main command", string(b))

	for _, user := range []string{"", "nobody"} {
		res, err := c.Run(ctx, client.Command{Cmd: shellEnv, User: user, Cwd: "/"})
		require.NoError(t, err)
		require.Equal(t, 0, res.Code, res.Stderr)
		check("/run as "+user, res.Stdout)

		var lines []string
		for ev, err := range c.RunStream(ctx, client.Command{Cmd: shellEnv, User: user, Cwd: "/"}) {
			require.NoError(t, err)
			if ev.Type == client.EventOutput {
				lines = append(lines, string(ev.Data))
			}
		}
		check("/run_streaming as "+user, strings.Join(lines, "\n"))

		p, err := c.StartProcess(ctx, client.Command{Cmd: "sleep 1000", User: user, Cwd: "/"})
		require.NoError(t, err)
		check("/start_process as "+user, procEnviron(p.PID))
		require.NoError(t, c.KillProcess(ctx, p.ID, ""))

		term, err := c.StartTerminal(ctx, client.TerminalOptions{Cmd: "sleep 1000", User: user, Cwd: "/"})
		require.NoError(t, err)
		check("/start_terminal as "+user, procEnviron(term.PID))
		require.NoError(t, c.KillTerminal(ctx, term.ID, ""))

		// With limits, the command runs through the rlimit helper, which
		// execs it with its own environment: that is the helper's too.
		body, err := json.Marshal(map[string]any{"cmd": shellEnv, "cwd": "/", "user": user, "limits": map[string]int{"open_files": 64}})
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.addr+"/run", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var limited struct {
			Stdout      string         `json:"stdout"`
			Code        int            `json:"code"`
			Termination map[string]any `json:"termination"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&limited))
		resp.Body.Close()
		require.Equal(t, 0, limited.Code, limited.Stdout)
		assert.Equal(t, map[string]any{"reason": "exit"}, limited.Termination)
		check("/run with limits as "+user, limited.Stdout)

		s, _, err := c.CreateSession(ctx, client.SessionConfig{User: user, TempWorkdir: true})
		require.NoError(t, err)
		res, err = c.Run(ctx, client.Command{Cmd: shellEnv, Session: s.ID})
		require.NoError(t, err)
		check("a session's /run as "+user, res.Stdout)
		require.NoError(t, c.DeleteSession(ctx, s.ID))
	}

	// Nor can nobody read the agent's own environment.
	res, err := c.Run(ctx, client.Command{Cmd: "cat /proc/" + strconv.Itoa(a.cmd.Process.Pid) + "/environ", User: "nobody", Cwd: "/"})
	require.NoError(t, err)
	assert.NotEqual(t, 0, res.Code)
	assert.NotContains(t, res.Stdout, testSecret)
}

// In pool mode the secret arrives through the file at SANDBOX_SECRET_PATH
// (here, claimed before a restart). Its path is not passed on either, and
// the file (mode 0600, as the claim writes it) is not nobody's to read.
func TestPoolSecretPathIsNotInherited(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the children run as nobody too")
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755)) // reachable, as /var/lib is: only the file's mode protects it
	secretPath := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secretPath, []byte(testSecret+"\n"), 0o600))
	a := execAgent(t, "", []string{"SANDBOX_AUTH_MODE=pool", "SANDBOX_SECRET=", "SANDBOX_SECRET_PATH=" + secretPath})
	c, err := client.New("http://"+a.addr, testSecret)
	require.NoError(t, err)
	for _, user := range []string{"", "nobody"} {
		res, err := c.Run(t.Context(), client.Command{Cmd: `tr '\0' '\n' </proc/$$/environ`, User: user, Cwd: "/"})
		require.NoError(t, err, "the secret from the file is in force")
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.NotContains(t, res.Stdout, "SANDBOX_SECRET", user)
		assert.NotContains(t, res.Stdout, secretPath, user)
		assert.NotContains(t, res.Stdout, testSecret, user)
	}
	res, err := c.Run(t.Context(), client.Command{Cmd: "cat " + secretPath, User: "nobody", Cwd: "/"})
	require.NoError(t, err)
	assert.NotEqual(t, 0, res.Code)
	assert.NotContains(t, res.Stdout, testSecret)
}
