package client_test

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/server"
)

func TestFiles(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	require.NoError(t, a.c.MakeDir(ctx, sub))
	require.NoError(t, a.c.MakeDir(ctx, sub), "mkdir -p: an existing directory is fine")

	// Every byte value, invalid UTF-8 and NULs included, round-trips.
	data := make([]byte, 0, 3*256)
	for range 3 {
		for b := range 256 {
			data = append(data, byte(b))
		}
	}
	name := filepath.Join(sub, "bin")
	require.NoError(t, a.c.WriteFile(ctx, name, data))
	onDisk, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, data, onDisk)
	got, err := a.c.ReadFile(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, data, got)

	require.NoError(t, a.c.WriteFile(ctx, filepath.Join(sub, "empty"), nil))
	got, err = a.c.ReadFile(ctx, filepath.Join(sub, "empty"))
	require.NoError(t, err)
	assert.Empty(t, got)

	info, err := a.c.StatFile(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, "bin", info.Name)
	assert.False(t, info.IsDir)
	assert.Equal(t, int64(len(data)), info.Size)
	assert.Equal(t, fs.FileMode(0o644), info.Mode)
	assert.WithinDuration(t, time.Now(), info.ModTime, time.Minute)

	list, err := a.c.ListDir(ctx, filepath.Join(dir, "a"))
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "b", list[0].Name)
	assert.True(t, list[0].IsDir)
	assert.Equal(t, fs.ModeDir|0o755, list[0].Mode)

	require.NoError(t, a.c.DeleteFile(ctx, name))
	_, err = os.Stat(name)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, a.c.DeleteDir(ctx, filepath.Join(dir, "a")))
	_, err = os.Stat(filepath.Join(dir, "a"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestFileErrors checks that what the file system refuses, which the agent
// answers 200 with the system's words, is an error that keeps those words
// and that errors.Is classifies.
func TestFileErrors(t *testing.T) {
	a := startAgent(t, agentConfig{})
	ctx := t.Context()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))

	_, err := a.c.ReadFile(ctx, missing)
	assertFileError(t, err, "open "+missing+": no such file or directory", fs.ErrNotExist)
	_, err = a.c.StatFile(ctx, missing)
	assertFileError(t, err, "stat "+missing+": no such file or directory", fs.ErrNotExist)
	_, err = a.c.ListDir(ctx, missing)
	assertFileError(t, err, "open "+missing+": no such file or directory", fs.ErrNotExist)
	err = a.c.DeleteFile(ctx, missing)
	assertFileError(t, err, "remove "+missing+": no such file or directory", fs.ErrNotExist)
	err = a.c.WriteFile(ctx, filepath.Join(missing, "x"), []byte("x"))
	assertFileError(t, err, "open "+filepath.Join(missing, "x")+": no such file or directory", fs.ErrNotExist)
	err = a.c.MakeDir(ctx, filepath.Join(file, "sub"))
	assertFileError(t, err, "mkdir "+file+": not a directory", nil)
	err = a.c.DeleteFile(ctx, dir)
	assertFileError(t, err, "remove "+dir+": is a directory", nil)
	assert.NoError(t, a.c.DeleteDir(ctx, missing), "rm -rf of nothing is fine")

	if os.Geteuid() != 0 {
		locked := filepath.Join(dir, "locked")
		require.NoError(t, os.WriteFile(locked, nil, 0o000))
		_, err = a.c.ReadFile(ctx, locked)
		assertFileError(t, err, "open "+locked+": permission denied", fs.ErrPermission)
	}

	_, err = a.c.ReadFile(ctx, "")
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode, "a malformed request is a 400")
	assert.False(t, errors.Is(err, fs.ErrNotExist))
}

func assertFileError(t *testing.T, err error, msg string, is error) {
	t.Helper()
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusOK, ae.StatusCode)
	assert.Equal(t, msg, ae.Message)
	assert.Equal(t, msg, err.Error(), "the OS's words, as they are")
	if is != nil {
		assert.ErrorIs(t, err, is)
	}
	for _, other := range []error{fs.ErrNotExist, fs.ErrExist, fs.ErrPermission} {
		if other != is {
			assert.NotErrorIs(t, err, other)
		}
	}
}

func TestPorts(t *testing.T) {
	a := startAgent(t, agentConfig{server: server.Config{ProxyPort: 4031}})
	ctx := t.Context()
	st, err := a.c.PortStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.Ports{Port: 0, ProxyPort: 4031}, st)

	st, err = a.c.BindPort(ctx, 8000)
	require.NoError(t, err)
	assert.Equal(t, client.Ports{Port: 8000, ProxyPort: 4031}, st)
	st, err = a.c.PortStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8000, st.Port)

	_, err = a.c.BindPort(ctx, 9000)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusConflict, ae.StatusCode)
	assert.Equal(t, "Port already bound", ae.Message)
	assert.Equal(t, map[string]any{"current_port": "8000"}, ae.Details)

	_, err = a.c.BindPort(ctx, 70000)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)

	require.NoError(t, a.c.UnbindPort(ctx))
	st, err = a.c.PortStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, st.Port)
	require.NoError(t, a.c.UnbindPort(ctx), "unbinding nothing is fine")
}

func TestHealth(t *testing.T) {
	a := startAgent(t, agentConfig{server: server.Config{ProxyPort: 4031, Version: "v9"}})
	h, err := a.c.Health(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, "v9", h.Version)
	assert.Equal(t, 4031, h.ProxyPort)
	assert.Less(t, h.Uptime, time.Minute)
}
