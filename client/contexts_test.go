package client_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

func TestClientRunCode(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	a := startAgent(t, agentConfig{})
	info, err := a.c.CreateContext(t.Context(), client.ContextConfig{Language: "python"})
	require.NoError(t, err)
	assert.Equal(t, 1, info.Generation)
	var names []string
	var result string
	for ev, err := range a.c.RunCode(t.Context(), client.CodeRun{Context: info.ID, Code: "x = 41\nprint('hi')\nx + 1", ExpectedGeneration: 1}) {
		require.NoError(t, err)
		if len(names) == 0 || names[len(names)-1] != ev.Name { // print writes "hi" and "\n" apart: one or two events
			names = append(names, ev.Name)
		}
		if ev.Name == "result" {
			var d struct {
				Data map[string]string `json:"data"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			result = d.Data["text/plain"]
		}
	}
	assert.Equal(t, []string{"stdout", "result", "complete"}, names)
	assert.Equal(t, "42", result)
	require.NoError(t, a.c.DeleteContext(t.Context(), info.ID))
	for _, err := range a.c.RunCode(t.Context(), client.CodeRun{Context: info.ID, Code: "x"}) {
		var e *client.Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, 404, e.StatusCode)
		assert.Equal(t, "no such context", e.Message)
	}
}
