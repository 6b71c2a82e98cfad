package contexts

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestRegistry(t *testing.T, opts Options) *Registry {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	r := NewRegistry(&executor.Runner{}, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Close(ctx))
	})
	return r
}

// collect runs code in c and returns its events and completion.
func collect(t *testing.T, c *Context, req RunRequest) ([]Event, Completion) {
	t.Helper()
	call, err := c.Run(t.Context(), req)
	require.NoError(t, err)
	var evs []Event
	timeout := time.After(30 * time.Second)
	for {
		more, comp := call.Take()
		evs = append(evs, more...)
		if comp != nil {
			return evs, *comp
		}
		select {
		case <-call.Ready():
		case <-timeout:
			t.Fatal("the call did not end within 30 s")
		}
	}
}

func text(evs []Event, name string) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Name == name {
			b.WriteString(ev.Data.(map[string]any)["data"].(string))
		}
	}
	return b.String()
}

func plain(t *testing.T, evs []Event, name string) string {
	t.Helper()
	for _, ev := range evs {
		if ev.Name == name {
			var s string
			require.NoError(t, json.Unmarshal(ev.Data.(map[string]any)["data"].(map[string]json.RawMessage)["text/plain"], &s))
			return s
		}
	}
	return ""
}

func TestStateLastsBetweenCalls(t *testing.T) {
	r := newTestRegistry(t, Options{})
	c, err := r.Create(t.Context(), Config{Language: "python"})
	require.NoError(t, err)
	evs, comp := collect(t, c, RunRequest{Code: "x = 41\nprint('hi')"})
	assert.Equal(t, "ok", comp.Status)
	assert.Equal(t, "hi\n", text(evs, "stdout"))
	evs, comp = collect(t, c, RunRequest{Code: "x + 1"})
	assert.Equal(t, "ok", comp.Status)
	assert.Equal(t, 2, comp.ExecutionCount)
	assert.Equal(t, "42", plain(t, evs, "result"))
	evs, comp = collect(t, c, RunRequest{Code: "1/0"})
	assert.Equal(t, "error", comp.Status)
	require.NotEmpty(t, evs)
	assert.Equal(t, "error", evs[0].Name)
	assert.Equal(t, "ZeroDivisionError", evs[0].Data.(map[string]any)["name"])
	evs, _ = collect(t, c, RunRequest{Code: "x"})
	assert.Equal(t, "41", plain(t, evs, "result"))
}

func TestNode(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	r := newTestRegistry(t, Options{})
	c, err := r.Create(t.Context(), Config{Language: "javascript"})
	require.NoError(t, err)
	evs, comp := collect(t, c, RunRequest{Code: "let y = 2\nconsole.log('hi', y)"})
	assert.Equal(t, "ok", comp.Status)
	assert.Equal(t, "hi 2\n", text(evs, "stdout"))
	evs, _ = collect(t, c, RunRequest{Code: "y * 21"})
	assert.Equal(t, "42", plain(t, evs, "result"))
	evs, comp = collect(t, c, RunRequest{Code: "null.x"})
	assert.Equal(t, "error", comp.Status)
	require.NotEmpty(t, evs)
	assert.Equal(t, "TypeError", evs[0].Data.(map[string]any)["name"])
	evs, _ = collect(t, c, RunRequest{Code: "new Promise(r => setTimeout(() => r(y + 1), 100))"})
	assert.Equal(t, "3", plain(t, evs, "result"))
	_, comp = collect(t, c, RunRequest{Code: "while (true) {}", Timeout: 500 * time.Millisecond})
	assert.Equal(t, "timeout", comp.Status)
	assert.False(t, comp.StateLost)
	evs, _ = collect(t, c, RunRequest{Code: "y"})
	assert.Equal(t, "2", plain(t, evs, "result"))
}
