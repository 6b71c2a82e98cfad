package server

import (
	"net/http"
	"regexp"
	"strconv"
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
	ts, _ := newTerminalServer(t, termServer{})
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
