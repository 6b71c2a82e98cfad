package main

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCLIWaitPort(t *testing.T) {
	a := startCLIAgent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	r := runCLI(t, a.env, nil, "wait-port", port)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "is ready on 127.0.0.1")

	// Flags after PORT too; -http probes with a GET, which a bare listener
	// never answers.
	r = runCLI(t, a.env, nil, "wait-port", port, "-http", "/", "-timeout", "0.5s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "is not ready: timeout")

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	r = runCLI(t, a.env, nil, "wait-port", "-http", "/", "-timeout", "5s", port)
	assert.Equal(t, 0, r.code, r.stderr)

	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	require.NoError(t, free.Close())
	r = runCLI(t, a.env, nil, "wait-port", "-timeout", "300ms", closed)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "refused")

	r = runCLI(t, a.env, nil, "wait-port", "http")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "invalid PORT")
}
