package main

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A port in use is said as such, with the flags that choose another.
func TestListenBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().String()
	env := getenv(map[string]string{"SANDBOX_SECRET": testSecret})
	err = run(t.Context(), []string{"-addr", busy, "-proxy-addr", "127.0.0.1:0"}, env, io.Discard)
	require.Error(t, err)
	assert.Equal(t, "API listener: "+busy+" is already in use (another agent?): stop what listens there, or choose another address with -addr or -port", err.Error())
	err = run(t.Context(), []string{"-addr", "127.0.0.1:0", "-proxy-addr", busy}, env, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TCP proxy listener: "+busy+" is already in use")
	assert.Contains(t, err.Error(), "-proxy-addr or -proxy-port")
}
