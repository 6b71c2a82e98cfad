package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wsExec is one /exec_ws connection as a test sees it.
type wsExec struct {
	t              *testing.T
	c              *websocket.Conn
	pid            int
	started        map[string]any // the started message
	stdout, stderr []byte
	exit           map[string]any // the exit message
	refusal        map[string]any // the error message
	close          websocket.StatusCode
}

// dialExec opens /exec_ws and sends req as its first message.
func dialExec(t *testing.T, ts *httptest.Server, req any) *wsExec {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), ts.URL+"/exec_ws", dialOptions(nil))
	require.NoError(t, err)
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	b, err := json.Marshal(req)
	require.NoError(t, err)
	require.NoError(t, c.Write(t.Context(), websocket.MessageText, b))
	return &wsExec{t: t, c: c, close: -1}
}

// readUntil reads frames until cond holds or the connection ends, for at
// most 30 s; it reports whether cond held.
func (w *wsExec) readUntil(cond func() bool) bool {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), 30*time.Second)
	defer cancel()
	for !cond() {
		typ, b, err := w.c.Read(ctx)
		if err != nil {
			w.close = websocket.CloseStatus(err)
			return cond()
		}
		if typ == websocket.MessageBinary {
			require.NotEmpty(w.t, b)
			switch b[0] {
			case execStdout:
				w.stdout = append(w.stdout, b[1:]...)
			case execStderr:
				w.stderr = append(w.stderr, b[1:]...)
			default:
				w.t.Fatalf("output on channel %d", b[0])
			}
			continue
		}
		var m map[string]any
		require.NoError(w.t, json.Unmarshal(b, &m))
		switch m["type"] {
		case "started":
			require.Nil(w.t, w.exit)
			require.Zero(w.t, w.pid, "started twice")
			require.Empty(w.t, w.stdout, "output before started")
			w.pid = int(m["pid"].(float64))
			w.started = m
		case "exit":
			w.exit = m
		case "error":
			w.refusal = m
		default:
			w.t.Fatalf("unexpected message %s", b)
		}
	}
	return true
}

// toEnd reads until the connection closes.
func (w *wsExec) toEnd() {
	w.t.Helper()
	w.readUntil(func() bool { return false })
	require.NotEqual(w.t, websocket.StatusCode(-1), w.close, "no close frame")
}

func (w *wsExec) send(channel byte, data []byte) {
	w.t.Helper()
	require.NoError(w.t, w.c.Write(w.t.Context(), websocket.MessageBinary, append([]byte{channel}, data...)))
}

func (w *wsExec) control(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(w.t, err)
	require.NoError(w.t, w.c.Write(w.t.Context(), websocket.MessageText, b))
}

func (w *wsExec) code() int {
	w.t.Helper()
	require.NotNil(w.t, w.exit, "no exit message")
	return int(w.exit["code"].(float64))
}

func (w *wsExec) termination() map[string]any {
	w.t.Helper()
	require.NotNil(w.t, w.exit, "no exit message")
	return w.exit["termination"].(map[string]any)
}

// Every byte value and a random MiB arrive exactly as written, on stdout
// and on stderr; so do CRLF, a lone CR and a last line without a newline.
func TestExecWSByteExact(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	data := make([]byte, 256, 256+1<<20)
	for i := range 256 {
		data[i] = byte(i)
	}
	data = append(data, make([]byte, 1<<20)...)
	_, _ = rand.Read(data[256:])
	f := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(f, data, 0o644))

	w := dialExec(t, ts, map[string]any{"cmd": "cat " + f + "; cat " + f + " >&2"})
	w.toEnd()
	assert.Equal(t, websocket.StatusNormalClosure, w.close)
	assert.Positive(t, w.pid)
	assert.Equal(t, sha256.Sum256(data), sha256.Sum256(w.stdout))
	assert.Equal(t, sha256.Sum256(data), sha256.Sum256(w.stderr))
	assert.Equal(t, 0, w.code())
	assert.Equal(t, map[string]any{"reason": "exit"}, w.termination())

	w = dialExec(t, ts, map[string]any{"cmd": `printf 'a\r\nb\rc'; printf 'abc' >&2`})
	w.toEnd()
	assert.Equal(t, "a\r\nb\rc", string(w.stdout))
	assert.Equal(t, "abc", string(w.stderr))
}

// argv runs the program with exactly its arguments; not found is the
// command's own 127.
func TestExecWSArgv(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	dir := filepath.Join(t.TempDir(), "a file")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "it's $HOME"), nil, 0o644))

	w := dialExec(t, ts, map[string]any{"argv": []string{"ls", "-a", dir}})
	w.toEnd()
	assert.Equal(t, ".\n..\nit's $HOME\n", string(w.stdout))
	assert.Equal(t, 0, w.code())

	w = dialExec(t, ts, map[string]any{"argv": []string{"sh", "-c", "echo hi; exit 3"}})
	w.toEnd()
	assert.Equal(t, "hi\n", string(w.stdout))
	assert.Equal(t, 3, w.code())

	w = dialExec(t, ts, map[string]any{"argv": []string{"no-such-program-here", "x"}})
	w.toEnd()
	assert.Equal(t, 127, w.code())
	assert.Contains(t, string(w.stderr), "no-such-program-here")
}

// A request /run would refuse is an error message and close 1008, with
// nothing started.
func TestExecWSRefused(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, req := range []any{
		map[string]any{},
		map[string]any{"cmd": "true", "argv": []string{"true"}},
		map[string]any{"argv": []string{}},
		map[string]any{"argv": "true"},
		map[string]any{"cmd": "true", "cwd": "/no/such/dir"},
		map[string]any{"cmd": "true", "timeout": -1},
		map[string]any{"cmd": "true", "tty": true, "cols": 0},
		map[string]any{"cmd": "true", "session": "no-such-session"},
		map[string]any{"cmd": "true", "user": "no-such-user-here"},
		"not an object",
	} {
		w := dialExec(t, ts, req)
		w.toEnd()
		assert.Equal(t, websocket.StatusPolicyViolation, w.close, "%v", req)
		require.NotNil(t, w.refusal, "%v", req)
		assert.NotEmpty(t, w.refusal["error"], "%v", req)
		assert.Zero(t, w.pid, "%v: started", req)
	}

	// A first frame that is not text.
	c, _, err := websocket.Dial(t.Context(), ts.URL+"/exec_ws", dialOptions(nil))
	require.NoError(t, err)
	defer c.CloseNow()
	require.NoError(t, c.Write(t.Context(), websocket.MessageBinary, []byte{0, 'x'}))
	w := &wsExec{t: t, c: c, close: -1}
	w.toEnd()
	assert.Equal(t, websocket.StatusPolicyViolation, w.close)
	assert.Contains(t, w.refusal["error"], "first message")
}

// Channel 0 is stdin when asked for, byte for byte to its end; ignored
// otherwise.
func TestExecWSStdin(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	w := dialExec(t, ts, map[string]any{"cmd": "sha256sum", "stdin": true})
	for b := data; len(b) > 0; {
		n := min(len(b), 100_000)
		w.send(execStdin, b[:n])
		b = b[n:]
	}
	w.send(execClose, []byte{execStdout}) // ignored
	w.send(execClose, []byte{execStdin})
	w.toEnd()
	sum := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", string(w.stdout))

	w = dialExec(t, ts, map[string]any{"cmd": "cat; echo end"})
	w.send(execStdin, []byte("ignored\n"))
	w.toEnd()
	assert.Equal(t, "end\n", string(w.stdout))
}

// A signal message kills the command: killed, with the signal; a signal
// nobody here sent is signal; the timeout is timeout.
func TestExecWSTermination(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	w := dialExec(t, ts, map[string]any{"cmd": "echo ready; sleep 100"})
	require.True(t, w.readUntil(func() bool { return len(w.stdout) > 0 }))
	w.control(map[string]any{"type": "signal", "signal": "SIGTERM"})
	w.toEnd()
	assert.Equal(t, 128+int(syscall.SIGTERM), w.code())
	assert.Equal(t, map[string]any{"reason": "killed", "signal": "SIGTERM"}, w.termination())

	w = dialExec(t, ts, map[string]any{"cmd": "kill -HUP $$"})
	w.toEnd()
	assert.Equal(t, 128+int(syscall.SIGHUP), w.code())
	assert.Equal(t, map[string]any{"reason": "signal", "signal": "SIGHUP"}, w.termination())

	start := time.Now()
	w = dialExec(t, ts, map[string]any{"cmd": "sleep 100", "timeout": 0.2})
	w.toEnd()
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, 124, w.code())
	assert.Equal(t, map[string]any{"reason": "timeout"}, w.termination())

	w = dialExec(t, ts, map[string]any{"cmd": "true"})
	w.control(map[string]any{"type": "bogus"})
	w.toEnd()
	assert.Contains(t, []websocket.StatusCode{websocket.StatusPolicyViolation, websocket.StatusNormalClosure}, w.close)
}

// tty runs the command on a terminal of the size asked, which resize
// changes; its output is merged on stdout.
func TestExecWSTTY(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	w := dialExec(t, ts, map[string]any{"cmd": "stty size; echo err >&2; read x; stty size; exit 4", "tty": true, "cols": 100, "rows": 30})
	require.True(t, w.readUntil(func() bool { return strings.Contains(string(w.stdout), "err") }))
	assert.Contains(t, string(w.stdout), "30 100\r\n")
	w.control(map[string]any{"type": "resize", "cols": 120, "rows": 40})
	w.send(execStdin, []byte("\r"))
	w.toEnd()
	assert.Contains(t, string(w.stdout), "40 120\r\n")
	assert.Empty(t, w.stderr)
	assert.Equal(t, 4, w.code())
	assert.Equal(t, map[string]any{"reason": "exit"}, w.termination())

	// Without a command, the login shell, interactive.
	w = dialExec(t, ts, map[string]any{"tty": true, "env": map[string]string{"SHELL": "/bin/sh", "PS1": "$ "}})
	w.send(execStdin, []byte("echo $((6*7)); exit 5\r"))
	w.toEnd()
	assert.Contains(t, string(w.stdout), "42")
	assert.Equal(t, 5, w.code())
}

// A client that leaves has the command's whole group killed.
func TestExecWSClientGone(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, tty := range []bool{false, true} {
		w := dialExec(t, ts, map[string]any{"cmd": "sleep 100 & echo started; wait", "tty": tty})
		require.True(t, w.readUntil(func() bool { return strings.Contains(string(w.stdout), "started") }))
		pgid := w.pid
		w.c.CloseNow()
		require.Eventually(t, func() bool {
			return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
		}, 10*time.Second, 10*time.Millisecond, "tty %v", tty)
	}
}

// A client that does not read holds the command up; nothing piles up in
// between, and every byte arrives once it reads.
func TestExecWSBackpressure(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	const size = 64 << 20
	c, _, err := websocket.Dial(t.Context(), ts.URL+"/exec_ws", dialOptions(&websocket.DialOptions{HTTPClient: smallReceiveBufferClient()}))
	require.NoError(t, err)
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	require.NoError(t, c.Write(t.Context(), websocket.MessageText, []byte(`{"cmd":"head -c 67108864 /dev/zero"}`)))
	w := &wsExec{t: t, c: c, close: -1}
	require.True(t, w.readUntil(func() bool { return w.pid != 0 }))
	// Unread, it cannot get far: the pipe, the socket buffers and one
	// frame hold a few hundred KiB, not 64 MiB.
	time.Sleep(500 * time.Millisecond) // the absence of progress is what is measured
	require.NoError(t, syscall.Kill(w.pid, 0), "the command finished with no reader")
	wchar := procIOField(t, w.pid, "wchar")
	assert.Less(t, wchar, int64(16<<20), "written with no reader")
	w.toEnd()
	assert.Equal(t, size, len(w.stdout))
	assert.True(t, bytes.Equal(make([]byte, size), w.stdout))
}

// procIOField returns a field of /proc/PID/io.
func procIOField(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := readProc(pid, "io")
	require.NoError(t, err)
	for line := range strings.Lines(b) {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			var n int64
			_, err := fmt.Sscan(strings.TrimSpace(v), &n)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/io", name, pid)
	return 0
}

// A command that reads none of its stdin for a while holds the reader,
// and with it the client's pongs: the client is not dropped for that.
// Pings every 50 ms that must be answered within 300 ms would drop it
// several times over during the 2 s the command sleeps.
func TestExecWSStdinWaitKeepsClient(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{KeepAlive: 50 * time.Millisecond, StallTimeout: 300 * time.Millisecond}})
	data := make([]byte, 4<<20) // more than the pipe and the socket buffers hold
	_, _ = rand.Read(data)
	w := dialExec(t, ts, map[string]any{"cmd": "sleep 2; sha256sum", "stdin": true})
	require.True(t, w.readUntil(func() bool { return w.pid != 0 }))
	sent := make(chan error, 1)
	go func() {
		var err error
		for b := data; len(b) > 0 && err == nil; {
			n := min(len(b), 64<<10)
			err = w.c.Write(t.Context(), websocket.MessageBinary, append([]byte{execStdin}, b[:n]...))
			b = b[n:]
		}
		if err == nil {
			err = w.c.Write(t.Context(), websocket.MessageBinary, []byte{execClose, execStdin})
		}
		sent <- err
	}()
	w.toEnd()
	require.NoError(t, <-sent)
	sum := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", string(w.stdout))
	assert.Equal(t, 0, w.code())
}

// In a session: a pipe command's cd and export are kept for the next;
// argv runs through the session's shell; a TTY command starts from the
// session's state and keeps the session in use while it is typed in.
func TestExecWSSession(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/create_session", map[string]any{"id": "s", "idle_timeout": 0.3})
	require.Equal(t, 201, code, body)
	w := dialExec(t, ts, map[string]any{"cmd": "cd / && export X=kept", "session": "s"})
	w.toEnd()
	require.Equal(t, 0, w.code())
	w = dialExec(t, ts, map[string]any{"argv": []string{"sh", "-c", `echo "$PWD $X"`}, "session": "s"})
	w.toEnd()
	assert.Equal(t, "/ kept\n", string(w.stdout))

	w = dialExec(t, ts, map[string]any{"cmd": "echo ready; read a; read b; echo \"$PWD $X $b\"", "tty": true, "session": "s"})
	// Typing starts once the command runs: input typed while the session's
	// shell is still setting the terminal up may be flushed with it.
	require.True(t, w.readUntil(func() bool { return strings.Contains(string(w.stdout), "ready") }), string(w.stdout))
	for i := range 8 { // 0.8 s of typing, past the idle timeout of 0.3 s
		time.Sleep(100 * time.Millisecond) // typing pace
		if i == 0 || i == 7 {
			w.send(execStdin, []byte("go\r"))
		}
		w.send(execStdin, nil)
	}
	w.toEnd()
	assert.Equal(t, 0, w.code(), string(w.stdout))
	assert.Contains(t, string(w.stdout), "/ kept go")
}

// At shutdown the commands' groups are killed and the agent closes with
// 1001, going away, with no exit message.
func TestExecWSShutdown(t *testing.T) {
	base, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	ts, _ := newTestServer(t, testServer{base: base})
	var ws []*wsExec
	for _, tty := range []bool{false, true} {
		w := dialExec(t, ts, map[string]any{"cmd": "sleep 100", "tty": tty})
		require.True(t, w.readUntil(func() bool { return w.pid != 0 }))
		ws = append(ws, w)
	}
	shutdown()
	for _, w := range ws {
		w.toEnd()
		assert.Equal(t, websocket.StatusGoingAway, w.close)
		assert.Nil(t, w.exit)
		require.Eventually(t, func() bool { return errors.Is(syscall.Kill(-w.pid, 0), syscall.ESRCH) },
			10*time.Second, 10*time.Millisecond)
	}
}
