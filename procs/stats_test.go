package procs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

func TestStats(t *testing.T) {
	r := newTestRegistry(t, Options{MaxRunning: 7, MaxTotalBytes: 1 << 20})
	s := r.Stats()
	assert.Equal(t, Stats{MaxRunning: 7, LogBudget: 1 << 20}, s)

	done, err := r.Start(executor.Command{Cmd: "seq 1 100"})
	require.NoError(t, err)
	running, err := r.Start(executor.Command{Cmd: "sleep 100"})
	require.NoError(t, err)
	waitDone(t, done)
	require.Eventually(t, func() bool { return r.Stats().Finished == 1 }, 5*time.Second, 5*time.Millisecond)
	s = r.Stats()
	assert.Equal(t, 1, s.Running)
	assert.Equal(t, uint64(2), s.Started)
	// 100 lines of 1 to 3 digits, each with its 48 bytes of bookkeeping.
	assert.GreaterOrEqual(t, s.LogBytes, int64(100*(1+48)))

	_, err = r.Kill(t.Context(), running.ID, 9)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.Stats().Running == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 2, r.Stats().Finished)
}

// A process's start and end are logged at debug level, with its id, pid,
// command and exit code.
func TestStartAndExitLogged(t *testing.T) {
	var buf testutil.SyncBuffer
	r := newTestRegistry(t, Options{Log: zerolog.New(&buf).Level(zerolog.DebugLevel)})
	p, err := r.Start(executor.Command{Cmd: "exit 3"})
	require.NoError(t, err)
	waitDone(t, p)
	var lines []map[string]any
	require.Eventually(t, func() bool {
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				lines = append(lines, m)
			}
		}
		return len(lines) == 2
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[string]any{"level": "debug", "message": "process started", "id": p.ID,
		"pid": float64(p.PID), "command": "exit 3"}, lines[0])
	assert.Equal(t, "process exited", lines[1]["message"])
	assert.Equal(t, p.ID, lines[1]["id"])
	assert.Equal(t, float64(p.PID), lines[1]["pid"])
	assert.Equal(t, "exit 3", lines[1]["command"])
	assert.Equal(t, float64(3), lines[1]["exit_code"])
	assert.Equal(t, "failed", lines[1]["status"])
	assert.Contains(t, lines[1], "duration_ms")
}

func TestLogCommand(t *testing.T) {
	assert.Equal(t, "echo hi", logCommand("echo hi"))
	long := strings.Repeat("é", maxLogCommand) // two bytes each
	got := logCommand(long)
	assert.LessOrEqual(t, len(got), maxLogCommand+len("…"))
	assert.True(t, strings.HasSuffix(got, "é…"), "cut at a rune boundary")
}
