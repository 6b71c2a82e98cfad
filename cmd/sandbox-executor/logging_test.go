package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// rfc3339Millis is a UTC RFC 3339 timestamp to the millisecond.
var rfc3339Millis = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestLogTimestamps(t *testing.T) {
	var buf testutil.SyncBuffer
	log := newLogger(&buf, zerolog.InfoLevel, logJSON)
	log.Info().Str("k", "v").Msg("hello")
	log.Debug().Msg("not written")
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(buf.String()), &line), buf.String())
	assert.Regexp(t, rfc3339Millis, line["time"])
	assert.Equal(t, "hello", line["message"])
	assert.Equal(t, "v", line["k"])
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"))
}

func TestLogConsoleFormat(t *testing.T) {
	var buf testutil.SyncBuffer
	log := newLogger(&buf, zerolog.InfoLevel, logConsole)
	log.Info().Str("request_id", "abc-1").Float64("duration_ms", 1.5).Msg("request")
	out := buf.String()
	// Such as "12:34:56.789 INF request duration_ms=1.5 request_id=abc-1".
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} INF request duration_ms=1.5 request_id=abc-1\n$`, out)
	assert.NotContains(t, out, "\x1b[", "no colours off a terminal")
}

// An agent started as a user would, from the environment, logs in the
// console format when asked and names the signal that stops it.
func TestShutdownNamesSignal(t *testing.T) {
	for _, format := range []string{logJSON, logConsole} {
		t.Run(format, func(t *testing.T) {
			exe, err := os.Executable()
			require.NoError(t, err)
			cmd := exec.Command(exe, "-addr", "127.0.0.1:0", "-proxy-addr", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), agentEnv+"=1", "SANDBOX_SECRET="+testSecret, "LOG_FORMAT="+format)
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			lines := make(chan string, 64)
			go func() { // ends when the agent exits and its stderr is drained
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			next := func() string {
				select {
				case l, ok := <-lines:
					require.True(t, ok, "the agent's log ended")
					return l
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					t.Fatal("no log line within 10 s")
					return ""
				}
			}
			first := next()
			assert.Contains(t, first, "listening")
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			var shutdown string
			for l := next(); !strings.Contains(l, "stopped"); l = next() {
				if strings.Contains(l, "shutting down") {
					shutdown = l
				}
			}
			for range lines {
			}
			require.NoError(t, cmd.Wait())
			if format == logJSON {
				var line map[string]any
				require.NoError(t, json.Unmarshal([]byte(shutdown), &line))
				assert.Equal(t, "SIGTERM", line["signal"])
				assert.Regexp(t, rfc3339Millis, line["time"])
			} else {
				assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} INF shutting down signal=SIGTERM$`, shutdown)
				assert.False(t, json.Valid([]byte(first)), "a console line: %s", first)
			}
		})
	}
}

// With SANDBOX_METRICS_OPEN, /metrics needs no token, and /stats still does.
func TestMetricsOpenFromEnv(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret, "SANDBOX_METRICS_OPEN": "true"}, options{})
	code, body := a.do(t, http.MethodGet, "/metrics", "", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "sandbox_http_requests_in_flight 1")
	code, _ = a.do(t, http.MethodGet, "/stats", "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, a.stderr.String(), `"metrics_open":true`)
}

// The debug log of a real agent shows a background process's start and
// exit, and a request's id.
func TestDebugLog(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret, "LOG_LEVEL": "debug"}, options{})
	c := a.newClient(t, testSecret)
	p, err := c.StartProcess(t.Context(), client.Command{Cmd: "exit 4"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(a.stderr.String(), `"message":"process exited"`) },
		5*time.Second, 10*time.Millisecond)
	var started, exited map[string]any
	for _, l := range strings.Split(a.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["id"] != p.ID {
			continue
		}
		switch m["message"] {
		case "process started":
			started = m
		case "process exited":
			exited = m
		}
	}
	require.NotNil(t, started)
	require.NotNil(t, exited)
	assert.Equal(t, float64(p.PID), started["pid"])
	assert.Equal(t, "exit 4", started["command"])
	assert.Equal(t, float64(4), exited["exit_code"])
	assert.Regexp(t, rfc3339Millis, exited["time"])
	assert.Contains(t, a.stderr.String(), `"message":"request"`)
	assert.Regexp(t, `"request_id":"[0-9a-f]{8}-\d+"`, a.stderr.String())
}

func TestNotifySignalsCause(t *testing.T) {
	ctx, stop := notifySignals(context.Background(), syscall.SIGUSR2)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR2))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the signal did not end the context")
	}
	assert.Equal(t, "SIGUSR2", shutdownSignal(ctx))

	ctx2, stop2 := notifySignals(context.Background(), syscall.SIGUSR2)
	stop2()
	assert.Equal(t, "", shutdownSignal(ctx2), "stopped, not signalled")
}
