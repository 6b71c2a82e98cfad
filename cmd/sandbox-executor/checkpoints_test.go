package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An agent restarted with the same -state-dir has the checkpoints of the
// one before, and can tell what changed since them and restore them.
func TestCheckpointsSurviveRestart(t *testing.T) {
	state, root := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "f"), []byte("one\n"), 0o644))
	env := map[string]string{"SANDBOX_SECRET": testSecret}

	a := startAgent(t, env, options{}, "-state-dir", state)
	code, body := a.do(t, http.MethodPost, "/create_checkpoint", testSecret, `{"path": "`+root+`"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var cp struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &cp))
	_, err := a.stop(t)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(root, "f"), []byte("two\n"), 0o644))
	b := startAgent(t, env, options{}, "-state-dir", state)
	code, body = b.do(t, http.MethodGet, "/changes?since=HEAD&path="+url.QueryEscape(root), testSecret, "")
	require.Equal(t, http.StatusOK, code, body)
	assert.JSONEq(t, `{"added":[],"modified":["f"],"deleted":[],"mode_changed":[]}`, body)
	code, body = b.do(t, http.MethodPost, "/restore_checkpoint", testSecret, `{"id": "`+cp.ID+`"}`)
	require.Equal(t, http.StatusOK, code, body)
	data, err := os.ReadFile(filepath.Join(root, "f"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(data))
}
