package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A TTY command's last output reaches the client before its exit, however
// its exit and the terminal's hang-up race with the reading of the master:
// 200 runs, each printing a line of its own with no newline and exiting
// with a code of its own.
func TestExecWSTTYLastOutput(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	const runs = 200
	deadline := time.Now().Add(2 * time.Minute) // bounds the whole loop, whatever the machine's load
	for i := range runs {
		require.True(t, time.Now().Before(deadline), "only %d runs in 2 minutes", i)
		last := fmt.Sprintf("last-%d-of-%d", i, runs)
		w := dialExec(t, ts, map[string]any{"cmd": fmt.Sprintf("printf %s; exit %d", last, i%100), "tty": true})
		w.toEnd()
		require.True(t, strings.HasSuffix(string(w.stdout), last), "run %d: %q", i, w.stdout)
		require.Equal(t, i%100, w.code(), "run %d", i)
		w.c.CloseNow()
	}
}

// A client that reads nothing for longer than ttyDrain after a TTY
// command exited still gets all of its output: the drain bounds the
// background jobs that keep a terminal open, not the delivery of what the
// program wrote before it exited.
func TestExecWSTTYSlowClientKeepsOutput(t *testing.T) {
	ts, _ := newTestServer(t, testServer{listener: withSmallSendBuffers})
	const size = 256 << 10 // far more than the socket buffers and the terminal hold
	c, _, err := websocket.Dial(t.Context(), ts.URL+"/exec_ws", dialOptions(&websocket.DialOptions{HTTPClient: smallReceiveBufferClient()}))
	require.NoError(t, err)
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	cmd := fmt.Sprintf(`stty -opost; head -c %d /dev/zero | tr '\0' x; printf END`, size)
	require.NoError(t, c.Write(t.Context(), websocket.MessageText, []byte(fmt.Sprintf(`{"cmd":%q,"tty":true}`, cmd))))
	w := &wsExec{t: t, c: c, close: -1}
	require.True(t, w.readUntil(func() bool { return w.pid != 0 }))
	// Read a frame every 5 ms, slower than the program writes, so that
	// the buffers stay full: when it exits, the agent still waits for the
	// client with the end of the output in the terminal. Then read nothing
	// for longer than the drain.
	ticks := 0
	require.Eventually(t, func() bool {
		if errors.Is(syscall.Kill(w.pid, 0), syscall.ESRCH) {
			return true
		}
		if ticks++; ticks%5 == 0 {
			frames := 0
			w.readUntil(func() bool { frames++; return frames > 1 }) // one frame
		}
		return false
	}, time.Minute, time.Millisecond)
	require.Less(t, len(w.stdout), size, "the client kept up: nothing was left to wait for")
	time.Sleep(ttyDrain + 500*time.Millisecond) // the absence of reading is what is tested
	w.toEnd()
	assert.Equal(t, size+len("END"), len(w.stdout))
	assert.True(t, bytes.Equal([]byte(strings.Repeat("x", size)+"END"), w.stdout))
	assert.Equal(t, 0, w.code())
}

// Background jobs that keep the terminal open after the program exited,
// silent or writing without end, hold the command for about the drain,
// not for as long as they run.
func TestExecWSTTYBackgroundDrain(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, cmd := range []string{"sleep 100 & exit 3", "yes & exit 3"} {
		start := time.Now()
		w := dialExec(t, ts, map[string]any{"cmd": cmd, "tty": true})
		w.toEnd()
		assert.Equal(t, 3, w.code(), cmd)
		assert.Less(t, time.Since(start), 20*ttyDrain, cmd) // far from 100 s, and from never
	}
}
