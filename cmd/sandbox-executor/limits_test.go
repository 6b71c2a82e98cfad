package main

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// setLimits probes ptrace once (here it works: no seccomp filter, no YAMA
// ptrace_scope 3) and keeps the helper, the agent's own binary, for what
// ptrace cannot serve.
func TestSetLimits(t *testing.T) {
	r := &executor.Runner{}
	setLimits(r, zerolog.Nop())
	assert.True(t, r.Ptrace)
	assert.Equal(t, "/proc/self/exe", r.Helper)
	assert.True(t, r.LimitSupport().OpenFiles)
}
