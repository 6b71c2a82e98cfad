package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSide opens /exec_ws for cmd with a stdin side channel and returns
// the connection and the channel's id.
func startSide(t *testing.T, ts *httptest.Server, cmd string) (*wsExec, string) {
	t.Helper()
	w := dialExec(t, ts, map[string]any{"cmd": cmd, "stdin": true, "stdin_raw": true})
	require.True(t, w.readUntil(func() bool { return w.started != nil }))
	id, _ := w.started["stdin_id"].(string)
	require.NotEmpty(t, id, "started: %v", w.started)
	return w, id
}

// readerOnly hides a reader's length from net/http: the body goes chunked.
type readerOnly struct{ io.Reader }

// 100 MiB of random bytes through the side channel reach the command byte
// for byte, spliced (a Content-Length) or chunked, and the body's end is
// EOF after the last of them: sha256sum and wc -c can only answer then.
func TestExecWSStdinSideChannel(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	data := make([]byte, 100<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)

	w, id := startSide(t, ts, "sha256sum")
	code, reply, err := writeRaw(t.Context(), ts, id, bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, reply)
	assert.Equal(t, float64(len(data)), reply["written"])
	w.toEnd()
	assert.Equal(t, hex.EncodeToString(sum[:])+"  -\n", string(w.stdout))
	assert.Equal(t, 0, w.code())

	w, id = startSide(t, ts, "wc -c")
	code, reply, err = writeRaw(t.Context(), ts, id, readerOnly{bytes.NewReader(data[:10<<20])})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, reply)
	w.toEnd()
	assert.Equal(t, "10485760\n", string(w.stdout))

	// Without stdin_raw, started is as it was: no stdin_id.
	w = dialExec(t, ts, map[string]any{"cmd": "true", "stdin": true})
	w.toEnd()
	assert.NotContains(t, w.started, "stdin_id")
}

// The side channel is attached once (409 after), an unknown id is 404,
// a request that asks for it wrongly is refused, and channel-0 frames
// are refused while it is attached: never two sources of stdin.
func TestExecWSStdinSideChannelRefusals(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, reply, err := writeRaw(t.Context(), ts, stdinIDPrefix+"00", strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code, reply)

	for _, req := range []map[string]any{
		{"cmd": "cat", "stdin_raw": true},
		{"cmd": "cat", "stdin": true, "stdin_raw": true, "tty": true},
	} {
		w := dialExec(t, ts, req)
		w.toEnd()
		assert.Equal(t, websocket.StatusPolicyViolation, w.close, req)
		require.NotNil(t, w.refusal, req)
		assert.Contains(t, w.refusal["error"], "stdin_raw")
	}

	w, id := startSide(t, ts, "cat")
	w.send(execStdin, []byte("before\n")) // not yet attached: taken
	require.True(t, w.readUntil(func() bool { return string(w.stdout) == "before\n" }))
	pr, pw := io.Pipe()
	defer pw.Close()
	first := make(chan int, 1)
	go func() {
		code, _, _ := writeRaw(context.Background(), ts, id, pr)
		first <- code
	}()
	_, err = pw.Write([]byte("side\n"))
	require.NoError(t, err)
	require.True(t, w.readUntil(func() bool { return string(w.stdout) == "before\nside\n" }))
	code, reply, err = writeRaw(t.Context(), ts, id, strings.NewReader("again"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, code, reply)

	w.send(execStdin, []byte("frame\n"))
	w.toEnd()
	assert.Equal(t, websocket.StatusPolicyViolation, w.close)
	assert.Equal(t, "before\nside\n", string(w.stdout), "the frame's bytes went nowhere")
	select {
	case code := <-first: // the refusal killed the command, which ended the upload
		assert.Equal(t, http.StatusConflict, code)
	case <-time.After(10 * time.Second):
		t.Fatal("the side request outlived its exec")
	}
}

// The side request ends with its exec, whether the command ends by itself
// or its client leaves (which kills the command's group), and whether the
// request waits for the command to read (the pipe is full) or for its
// client to send: spliced and chunked.
func TestExecWSStdinSideChannelEnds(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, tc := range []struct {
		name    string
		cmd     string
		leave   bool // the WebSocket client leaves
		full    bool // the body fills the pipe, rather than stopping
		chunked bool
	}{
		{name: "exit, pipe full, spliced", cmd: "head -c 1 >/dev/null; echo got; sleep 0.3", full: true},
		{name: "exit, client silent, spliced", cmd: "head -c 1 >/dev/null; echo got; sleep 0.3"},
		{name: "exit, client silent, chunked", cmd: "head -c 1 >/dev/null; echo got; sleep 0.3", chunked: true},
		{name: "client gone, pipe full", cmd: "head -c 1 >/dev/null; echo got; sleep 100 & wait", leave: true, full: true},
		{name: "client gone, client silent, chunked", cmd: "head -c 1 >/dev/null; echo got; sleep 100 & wait", leave: true, chunked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, id := startSide(t, ts, tc.cmd)
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { // the body: 64 KiB, then, if full, 128 MiB more
				_, _ = pw.Write(make([]byte, 64<<10))
				if tc.full {
					_, _ = pw.Write(make([]byte, 128<<20))
				}
			}()
			type result struct {
				code    int
				written float64
			}
			done := make(chan result, 1)
			go func() {
				edit := func(req *http.Request) { req.ContentLength = 256 << 20 }
				if tc.chunked {
					edit = nil
				}
				code, reply, _ := postStdin(context.Background(), ts, id, pr, edit)
				written, _ := reply["written"].(float64)
				done <- result{code, written}
			}()
			pgid := w.pid
			// got: the side channel is attached, and the command now
			// reads no more.
			require.True(t, w.readUntil(func() bool { return string(w.stdout) == "got\n" }))
			if tc.leave {
				w.c.CloseNow()
			}
			select {
			case res := <-done:
				assert.Equal(t, http.StatusConflict, res.code)
				// Backpressure: what went in is what the pipe holds (its
				// 256 slots, 1 MiB of pages, which spliced socket pages can fill
				// past a page each), never the 128 MiB offered.
				assert.Less(t, res.written, float64(32<<20))
			case <-time.After(15 * time.Second):
				t.Fatal("the side request outlived its exec")
			}
			if tc.leave {
				require.Eventually(t, func() bool {
					return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
				}, 10*time.Second, 10*time.Millisecond, "the group lives on")
			} else {
				w.toEnd()
				assert.Equal(t, 0, w.code())
			}
		})
	}
}
