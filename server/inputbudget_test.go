package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Background processes' inputs used to be held until read, without a
// bound. Past the input budget, /start_process, /run and /run_streaming
// answer 503 naming the budget and its size; a killed process gives its
// input back, and the budget takes as much again. Each input is larger
// than the stdin pipe (1 MiB), so that most of it waits in the agent.
func TestInputBudgetIs503(t *testing.T) {
	runner := &executor.Runner{MaxInput: 4 << 20, DrainDelay: 100 * time.Millisecond}
	ts, _ := newTestServer(t, testServer{runner: runner})
	input := strings.Repeat("x", 3<<19)
	const want = "input budget exhausted: commands have not yet read 3145728 bytes of input, and this command's 1572864 more would pass the input budget of 4194304 bytes; retry once they have"
	fill := func() []string {
		t.Helper()
		var ids []string
		for range 2 {
			code, body := call(t, ts, http.MethodPost, "/start_process", map[string]any{"cmd": "sleep 100", "input": input})
			require.Equal(t, http.StatusCreated, code, body)
			ids = append(ids, body["id"].(string))
		}
		for _, path := range []string{"/start_process", "/run", "/run_streaming"} {
			code, body := call(t, ts, http.MethodPost, path, map[string]any{"cmd": "sleep 100", "input": input})
			assert.Equal(t, http.StatusServiceUnavailable, code, path)
			assert.Equal(t, want, body["error"], path)
		}
		return ids
	}
	kill := func(ids []string) {
		t.Helper()
		for _, id := range ids {
			code, body := call(t, ts, http.MethodPost, "/kill_process", map[string]any{"id": id})
			require.Equal(t, http.StatusOK, code, body)
		}
	}
	kill(fill())
	assert.Equal(t, int64(0), runner.InputHeld(), "killed processes gave their input back")
	kill(fill())
}
