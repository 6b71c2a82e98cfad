package executor

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatStateGroup(t *testing.T) {
	tests := []struct {
		stat  string
		state byte
		pgrp  int
		ok    bool
	}{
		{"42 (sleep) S 1 40 40 0 -1", 'S', 40, true},
		{"42 (a) b) (c) Z 1 77 77 0", 'Z', 77, true}, // a name with ") " in it
		{"42 (x)", 0, 0, false},
		{"42 (x) R 1", 0, 0, false},
	}
	for _, tt := range tests {
		state, pgrp, ok := statStateGroup([]byte(tt.stat))
		assert.Equal(t, tt.ok, ok, tt.stat)
		if tt.ok {
			assert.Equal(t, tt.state, state, tt.stat)
			assert.Equal(t, tt.pgrp, pgrp, tt.stat)
		}
	}
}

// A group whose members are all gone, or zombies, has no live members;
// one with a running member has.
func TestHasLiveMembers(t *testing.T) {
	r := &Runner{}
	p, err := r.Start(t.Context(), Command{Cmd: "sleep 100"}, func(Stream, time.Time, [][]byte) {})
	require.NoError(t, err)
	assert.True(t, hasLiveMembers(p.Pid()))
	require.NoError(t, p.Signal(syscall.SIGKILL))
	p.Wait()
	assert.False(t, hasLiveMembers(p.Pid()))
}
