package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The errors of a missing secret and of a secret file that cannot be
// saved name the settings that fix them.
func TestNewAuthNamesTheSettings(t *testing.T) {
	// /proc takes no new files, not even from root.
	_, err := newAuth(config{authMode: authPool, secretPath: "/proc/sandbox-secret"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool mode cannot save the claimed secret at /proc/sandbox-secret")
	assert.Contains(t, err.Error(), "SANDBOX_SECRET_PATH")

	_, err = newAuth(config{authMode: authStatic})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SANDBOX_SECRET is not set")
	assert.Contains(t, err.Error(), "SANDBOX_AUTH_MODE=pool")
}
