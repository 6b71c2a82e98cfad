package server

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// A terminal started in a session starts from the session's directory and
// environment, and deleting the session kills all of it: an interactive
// shell puts a background job in a process group of its own, which a
// kill of the shell's group alone would leave running.
func TestSessionTerminal(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := t.TempDir()
	code, body := call(t, ts, http.MethodPost, "/create_session",
		map[string]any{"id": "tty", "cwd": dir, "env": map[string]string{"E": "session"}})
	require.Equal(t, http.StatusCreated, code, "%v", body)

	code, body = call(t, ts, http.MethodPost, "/start_terminal", map[string]any{"session": "nope"})
	assert.Equal(t, http.StatusNotFound, code, "%v", body)

	id := startTerminal(t, ts, map[string]any{"session": "tty", "cmd": "bash --norc -i", "env": map[string]string{"PS1": "$ "}})
	w := dialTerminal(t, ts, id, "", nil)
	w.send(`echo "at:$PWD:$E"` + "\n")
	w.waitFor("at:" + dir + ":session\r\n")
	w.send("sleep 300 & echo job=$!\n")
	jobLine := regexp.MustCompile(`job=(\d+)\r\n`)
	require.True(t, w.readUntil(func() bool { return jobLine.Match(w.out) }), "%q", w.out)
	m := jobLine.FindSubmatch(w.out)
	job, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	require.True(t, testutil.Alive(job))

	code, body = call(t, ts, http.MethodPost, "/delete_session", map[string]any{"id": "tty"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Eventually(t, func() bool { return !testutil.Alive(job) }, 5*time.Second, 10*time.Millisecond,
		"the terminal's background job outlived its session")
	require.Eventually(t, func() bool { return listTerminals(t, ts)[0]["status"] != "running" }, 5*time.Second, 10*time.Millisecond)
}

// A terminal in use keeps its session alive: traffic on its WebSocket,
// keystrokes typed or output read by a client watching, counts as
// activity, as a request does. Once its clients go quiet, the idle
// timeout deletes the session and kills its terminals. Before the fix, a
// session with idle_timeout 1 killed a shell typed into every second.
func TestSessionTerminalIdle(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	const idle = time.Second
	sessionsListed := func() []string {
		code, out := call(t, ts, http.MethodGet, "/list_sessions", nil)
		require.Equal(t, http.StatusOK, code)
		var ids []string
		for _, v := range out["sessions"].([]any) {
			ids = append(ids, v.(map[string]any)["id"].(string))
		}
		return ids
	}
	for _, id := range []string{"typed", "watched"} {
		code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": id, "idle_timeout": idle.Seconds()})
		require.Equal(t, http.StatusCreated, code, "%v", body)
	}
	typed := dialTerminal(t, ts, startTerminal(t, ts, map[string]any{"session": "typed", "cmd": "cat"}), "", nil)
	// Output only, for a client that reads it and types nothing; bounded.
	watched := dialTerminal(t, ts, startTerminal(t, ts, map[string]any{"session": "watched",
		"cmd": "i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo tick; sleep 0.05; done"}), "", nil)

	// A user typing every idle/4 for three idle timeouts: the pauses are
	// what is under test, so they are real.
	tick := time.NewTicker(idle / 4)
	defer tick.Stop()
	for i, start := 0, time.Now(); time.Since(start) < 3*idle; i++ {
		key := fmt.Sprintf("key-%d\n", i)
		typed.send(key)
		typed.waitFor(strings.Replace(key, "\n", "\r\n", 1))
		seen := len(watched.out)
		require.True(t, watched.readUntil(func() bool { return len(watched.out) > seen }), "%v", watched.err)
		<-tick.C
	}
	assert.ElementsMatch(t, []string{"typed", "watched"}, sessionsListed(), "sessions in use outlive their idle timeout")
	for _, item := range listTerminals(t, ts) {
		assert.Equal(t, "running", item["status"])
	}

	// Quiet now: the clients are still connected but neither types nor
	// reads (cat waits for input; the other's output is not taken).
	require.Eventually(t, func() bool { return !slices.Contains(sessionsListed(), "typed") }, 10*idle, 20*time.Millisecond)
	typed.toEnd()
	assert.Equal(t, 137, *typed.exit, "killed with its session")
}
