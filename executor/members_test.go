package executor

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		stat string
		want procStat
		ok   bool
	}{
		{"42 (sleep) S 1 40 40 0 -1", procStat{pid: 42, state: 'S', pgrp: 40, session: 40}, true},
		{"42 (a) b) (c) Z 1 77 78 0", procStat{pid: 42, state: 'Z', pgrp: 77, session: 78}, true}, // a name with ") " in it
		{"7 (a ) (b) R 1 7 9 0", procStat{pid: 7, state: 'R', pgrp: 7, session: 9}, true},
		{"42 (sh) S 1 42 42 34816 42 4194560", procStat{pid: 42, state: 'S', pgrp: 42, session: 42}, true},
		{"42 (x)", procStat{}, false},
		{"42 (x) R 1", procStat{}, false},
		{"7 (x) Z 1 7", procStat{}, false},
		{"garbage", procStat{}, false},
	}
	for _, tt := range tests {
		got, ok := parseStat([]byte(tt.stat))
		assert.Equal(t, tt.ok, ok, tt.stat)
		if tt.ok {
			assert.Equal(t, tt.want, got, tt.stat)
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
