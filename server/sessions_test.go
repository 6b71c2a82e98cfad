package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

func TestSessionRunPersists(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "s1", "workdir": "temp"})
	require.Equal(t, http.StatusCreated, code, body)
	workdir := body["cwd"].(string)
	assert.Equal(t, "s1", body["id"])
	assert.NotEmpty(t, body["user"])
	require.DirExists(t, workdir)

	run := func(cmd string) map[string]any {
		t.Helper()
		code, body := call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": cmd, "session": "s1"})
		require.Equal(t, http.StatusOK, code, body)
		return body
	}
	assert.Equal(t, workdir+"\n", run("pwd")["stdout"])
	run("mkdir -p app && cd app && export A=1 && exit 3")
	assert.Equal(t, workdir+"/app 1\n", run(`echo "$PWD $A"`)["stdout"])
	run("unset A")
	assert.Equal(t, "-\n", run(`echo "${A:--}"`)["stdout"])

	// /run_streaming commits before complete.
	_, next := stream(t, ts, http.MethodPost, "/run_streaming", map[string]any{"cmd": "cd /; export S=streamed; echo ok", "session": "s1"})
	evs := readAll(t, next)
	require.Equal(t, "complete", evs[len(evs)-1].Name)
	assert.Equal(t, "/ streamed\n", run(`echo "$PWD $S"`)["stdout"])

	// A request's own timeout and cwd.
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "export T=1; sleep 5", "session": "s1", "timeout": 0.1})
	require.Equal(t, http.StatusOK, code)
	assert.EqualValues(t, 124, body["code"])
	assert.Equal(t, "-\n", run(`echo "${T:--}"`)["stdout"], "a timed-out command commits nothing")
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "pwd", "session": "s1", "cwd": "usr"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "/usr\n", body["stdout"], "a relative cwd is the session's")

	code, body = call(t, ts, http.MethodGet, "/list_sessions", nil)
	require.Equal(t, http.StatusOK, code)
	list := body["sessions"].([]any)
	require.Len(t, list, 1)
	item := list[0].(map[string]any)
	assert.Equal(t, "s1", item["id"])
	assert.Equal(t, "/", item["cwd"])
	assert.EqualValues(t, 0, item["running"])
	assert.ElementsMatch(t, []string{"id", "cwd", "user", "created_at", "last_used_at", "running"}, keys(item))

	code, body = call(t, ts, http.MethodPost, "/delete_session", map[string]any{"id": "s1"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, true, body["success"])
	assert.NoDirExists(t, workdir)
	for _, path := range []string{"/run", "/run_streaming", "/start_process"} {
		code, body = call(t, ts, http.MethodPost, path, map[string]any{"cmd": "true", "session": "s1"})
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.Equal(t, "session not found: s1", body["error"], path)
	}
	code, body = call(t, ts, http.MethodPost, "/delete_session", map[string]any{"id": "s1"})
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "session not found: s1", body["error"])
	code, body = call(t, ts, http.MethodGet, "/list_sessions", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, []any{}, body["sessions"])
}

func TestSessionCreateErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "dup", "cwd": "/tmp", "timeout": 30})
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, map[string]any{"id": "dup", "cwd": "/tmp", "user": body["user"]}, body)

	code, body = call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "dup"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "session already exists: dup", body["error"])
	code, body = call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "dup", "cwd": "/", "reuse": true})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "/tmp", body["cwd"], "the existing session, as it is")

	code, body = call(t, ts, http.MethodPost, "/create_session", map[string]any{})
	require.Equal(t, http.StatusCreated, code)
	assert.Len(t, body["id"], 36, "a UUID")

	for _, req := range []map[string]any{
		{"id": "a/b"}, {"id": strings.Repeat("x", 129)}, {"id": "sp ace"},
		{"cwd": "/no/such/dir"}, {"cwd": "/etc/passwd"}, {"workdir": "tmp"},
		{"env": map[string]string{"A=B": "1"}}, {"idle_timeout": -1}, {"timeout": 1e9},
		{"user": "no-such-user-anywhere"}, {"id": 5},
	} {
		code, body := call(t, ts, http.MethodPost, "/create_session", req)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %v", req, body)
	}
	code, body = call(t, ts, http.MethodPost, "/delete_session", map[string]any{})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "id is required", body["error"])
}

// The session's timeout is the default of its commands; a request's own
// wins.
func TestSessionTimeout(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, _ := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "t", "timeout": 0.2})
	require.Equal(t, http.StatusCreated, code)
	code, body := call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "sleep 5", "session": "t"})
	require.Equal(t, http.StatusOK, code)
	assert.EqualValues(t, 124, body["code"])
	assert.Equal(t, "command timed out after 200ms", body["error"])
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "sleep 0.5; echo slept", "session": "t", "timeout": 30})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "slept\n", body["stdout"])
}

// A background process starts from the session's state, commits nothing
// and dies with the session, grandchildren included.
func TestSessionBackgroundProcess(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	dir := t.TempDir()
	code, _ := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "bg", "cwd": dir, "env": map[string]string{"E": "session"}})
	require.Equal(t, http.StatusCreated, code)
	pids := filepath.Join(dir, "pids")
	code, body := call(t, ts, http.MethodPost, "/start_process", map[string]any{
		"cmd": `pwd; echo "$E"; cd /; export E=changed; sleep 300 & echo $! >` + pids + `; wait`, "session": "bg"})
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	var pid int
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(pids)
		var err error
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": `echo "$PWD $E"`, "session": "bg"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, dir+" session\n", body["stdout"])
	code, body = call(t, ts, http.MethodGet, "/list_sessions", nil)
	require.Equal(t, http.StatusOK, code)
	assert.EqualValues(t, 1, body["sessions"].([]any)[0].(map[string]any)["running"])

	code, _ = call(t, ts, http.MethodPost, "/delete_session", map[string]any{"id": "bg"})
	require.Equal(t, http.StatusOK, code)
	// Killed before delete_session replied; it may still be in the
	// middle of its exit (its pipes closed, not yet a zombie) under load.
	require.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 5*time.Millisecond,
		"the background process's grandchild is gone")
	info := waitStatus(t, s, id)
	assert.NotEqual(t, procs.StatusRunning, info.Status)
}

// user on a single command and on a session: as root, the command runs as
// that user; otherwise 403.
func TestUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run commands as another user")
	}
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": `id -u; echo "$HOME $USER $LOGNAME"`, "user": "nobody", "cwd": "/"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "65534\n/nonexistent nobody nobody\n", body["stdout"])
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "id -u", "user": 65534, "cwd": "/"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "65534\n", body["stdout"])
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "true", "user": "no-such-user-anywhere"})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, `unknown user: "no-such-user-anywhere"`, body["error"])

	code, body = call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "n", "user": "nobody", "workdir": "temp"})
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, "nobody", body["user"])
	fi, err := os.Stat(body["cwd"].(string))
	require.NoError(t, err)
	assert.EqualValues(t, 65534, fi.Sys().(*syscall.Stat_t).Uid)
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "id -u", "session": "n"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "65534\n", body["stdout"])
}

func TestUserNotRoot(t *testing.T) {
	runner := &executor.Runner{Privileged: func() bool { return false }}
	ts, _ := newTestServer(t, testServer{runner: runner})
	want := "running a command as another user needs an agent running as root"
	for _, path := range []string{"/run", "/run_streaming", "/start_process"} {
		code, body := call(t, ts, http.MethodPost, path, map[string]any{"cmd": "true", "user": "nobody"})
		assert.Equal(t, http.StatusForbidden, code, path)
		assert.Equal(t, want, body["error"], path)
	}
	code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"user": "nobody"})
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, want, body["error"])
	code, _ = call(t, ts, http.MethodPost, "/create_session", map[string]any{"user": "no-such-user-anywhere"})
	assert.Equal(t, http.StatusForbidden, code, "refused before the user is even looked up")
}

// A command whose own user is not its session's is refused with 400, in
// either direction, on every endpoint that takes a session; the session's
// own user, named, is fine.
func TestSessionUserMismatch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run commands as another user")
	}
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "n", "user": "nobody", "workdir": "temp"})
	require.Equal(t, http.StatusCreated, code, body)
	code, body = call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "r"})
	require.Equal(t, http.StatusCreated, code, body)
	for _, tc := range []struct{ session, user, want string }{
		{"n", "root", "a session's commands run as the session's user: session n runs as nobody, not as root; create a session for root"},
		{"n", "0", "a session's commands run as the session's user: session n runs as nobody, not as root; create a session for root"},
		{"r", "nobody", "a session's commands run as the session's user: session r runs as root, not as nobody; create a session for nobody"},
	} {
		for _, path := range []string{"/run", "/run_streaming", "/start_process", "/start_terminal"} {
			code, body := call(t, ts, http.MethodPost, path, map[string]any{"cmd": "true", "session": tc.session, "user": tc.user})
			assert.Equal(t, http.StatusBadRequest, code, path)
			assert.Equal(t, tc.want, body["error"], path)
		}
	}
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "id -u", "session": "n", "user": "65534"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "65534\n", body["stdout"])
	code, body = call(t, ts, http.MethodPost, "/run", map[string]any{"cmd": "id -u", "session": "r", "user": "root"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "0\n", body["stdout"])
}
