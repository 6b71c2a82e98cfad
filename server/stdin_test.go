package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// startStdin starts cmd through /start_process with the given extra
// fields and returns its id.
func startStdin(t *testing.T, ts *httptest.Server, cmd string, extra map[string]any) string {
	t.Helper()
	body := map[string]any{"cmd": cmd}
	for k, v := range extra {
		body[k] = v
	}
	code, reply := call(t, ts, "POST", "/start_process", body)
	require.Equal(t, http.StatusCreated, code, reply)
	return reply["id"].(string)
}

// writeRaw sends body to /write_stdin?id=id as a raw body, with ctx, and
// returns the status and the decoded reply; err is the client's.
func writeRaw(ctx context.Context, ts *httptest.Server, id string, body io.Reader) (int, map[string]any, error) {
	return postStdin(ctx, ts, id, body, nil)
}

// postStdin is writeRaw, with edit (if not nil) called on the request
// before it is sent.
func postStdin(ctx context.Context, ts *httptest.Server, id string, body io.Reader, edit func(*http.Request)) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/write_stdin?id="+id, body)
	if err != nil {
		return 0, nil, err
	}
	if edit != nil {
		edit(req)
	}
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := ts.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	err = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, err
}

// writeJSON sends {"id", "data"} to /write_stdin with ctx.
func writeJSON(ctx context.Context, ts *httptest.Server, id, data string) (int, map[string]any, error) {
	b, _ := json.Marshal(map[string]any{"id": id, "data": data})
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/write_stdin", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := ts.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	err = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, err
}

// processLog reads the whole log of process id once it has ended.
func processLog(t *testing.T, ts *httptest.Server, id string) []string {
	t.Helper()
	_, next := stream(t, ts, "GET", "/process_logs_streaming?id="+id, nil)
	var lines []string
	for _, ev := range readAll(t, next) {
		if ev.Name == "log" {
			lines = append(lines, ev.Data["data"].(string))
		}
	}
	return lines
}

// handlersIn counts the goroutines whose stack holds fn: the proof that
// a handler has ended, rather than left blocked behind.
func handlersIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fn+"(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

const (
	writeHandler = "server.(*Server).handleStdinWrite"
	pipeWrite    = "executor.(*stdinWriter).Write" // a write waiting for the process to read
)

func TestInputOnTheThreeEndpoints(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "python3 -", "input": "print(6*7)"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "42\n", body["stdout"])

	code, body = call(t, ts, "POST", "/run", map[string]any{"cmd": "cat", "input": "a\nb"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a\nb", body["stdout"])

	_, next := stream(t, ts, "POST", "/run_streaming", map[string]any{"cmd": "cat", "input": "one\ntwo\n"})
	evs := readAll(t, next)
	require.Len(t, evs, 3)
	assert.Equal(t, "one", evs[0].Data["data"])
	assert.Equal(t, "two", evs[1].Data["data"])
	assert.Equal(t, "complete", evs[2].Name)

	id := startStdin(t, ts, "cat", map[string]any{"input": "x\ny\n"})
	assert.Equal(t, []string{"x", "y"}, processLog(t, ts, id)) // EOF after the input: cat ends

	id = startStdin(t, ts, "cat", map[string]any{"input": "first\n", "stdin": true})
	code, body = call(t, ts, "POST", "/write_stdin", map[string]any{"id": id, "data": "second\n"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, map[string]any{"success": true, "written": float64(7)}, body)
	code, _ = call(t, ts, "POST", "/close_stdin", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, []string{"first", "second"}, processLog(t, ts, id))
}

// A command that never reads a large input still ends, and /run returns.
func TestRunInputNeverReadReturns(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, "POST", "/run", map[string]any{"cmd": "echo done", "input": strings.Repeat("x", 10<<20)})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "done\n", body["stdout"])
	assert.Equal(t, float64(0), body["code"])
}

// EOF reaches wc -c after close_stdin, and it counts every byte of a raw
// write and a base64 one.
func TestWriteStdinRawAndBase64ThenCloseReachesWC(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startStdin(t, ts, "wc -c", map[string]any{"stdin": true})
	raw := bytes.Repeat([]byte{0, 1, 2, 'a', '\n', 0xff}, 512<<10) // 3 MiB, binary
	code, body, err := writeRaw(t.Context(), ts, id, bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, float64(len(raw)), body["written"])

	code, body = call(t, ts, "POST", "/write_stdin", map[string]any{"id": id, "data": base64.StdEncoding.EncodeToString([]byte{0, 0xfe, 0xff}), "is_base64": true})
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, float64(3), body["written"])

	for range 2 { // idempotent
		code, body = call(t, ts, "POST", "/close_stdin", map[string]any{"id": id})
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, map[string]any{"success": true}, body)
	}
	assert.Equal(t, procs.StatusCompleted, waitStatus(t, s, id).Status)
	assert.Equal(t, []string{fmt.Sprint(len(raw) + 3)}, processLog(t, ts, id))
	code, _ = call(t, ts, "POST", "/close_stdin", map[string]any{"id": id}) // after the end too
	assert.Equal(t, http.StatusOK, code)
}

// Many concurrent writes of distinct long payloads, JSON and raw (copied,
// and spliced past spliceMin), into one cat: each payload comes out in
// one piece.
func TestWriteStdinConcurrentRequestsDoNotInterleave(t *testing.T) {
	ts, s := newTestServer(t, testServer{procs: procs.Options{MaxLines: 20_000, MaxBytes: 64 << 20}})
	id := startStdin(t, ts, "cat", map[string]any{"stdin": true})
	const writers, lines = 12, 1200 // 1.2 MiB each, more than the pipe holds
	pad := strings.Repeat(".", 1010)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var b strings.Builder
			for i := range lines {
				fmt.Fprintf(&b, "w%d-%d%s\n", w, i, pad)
			}
			var code int
			var body map[string]any
			var err error
			switch w % 3 {
			case 0:
				code, body, err = writeRaw(t.Context(), ts, id, strings.NewReader(b.String())) // spliced
			case 1:
				code, body, err = writeRaw(t.Context(), ts, id, io.MultiReader(strings.NewReader(b.String()))) // chunked: copied
			default:
				code, body, err = writeJSON(t.Context(), ts, id, b.String())
			}
			assert.NoError(t, err)
			assert.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, float64(b.Len()), body["written"])
		})
	}
	wg.Wait()
	code, _ := call(t, ts, "POST", "/close_stdin", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	waitStatus(t, s, id)
	got := processLog(t, ts, id)
	require.Len(t, got, writers*lines)
	seen := map[int]bool{}
	for at := 0; at < len(got); at += lines {
		var w int
		_, err := fmt.Sscanf(got[at], "w%d-0", &w)
		require.NoError(t, err, got[at])
		assert.False(t, seen[w], "writer %d twice", w)
		seen[w] = true
		for i := range lines {
			require.Equal(t, fmt.Sprintf("w%d-%d%s", w, i, pad), got[at+i], "line %d", at+i)
		}
	}
}

// A write to a process that does not read blocks only that request:
// writes to another process, close_stdin and kill_process of this one all
// still work, and the kill ends the blocked write.
func TestWriteStdinBlockedWriteBlocksOnlyItself(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	sleeper := startStdin(t, ts, "sleep 100", map[string]any{"stdin": true})
	other := startStdin(t, ts, "cat", map[string]any{"stdin": true})

	type reply struct {
		code int
		body map[string]any
	}
	blocked := make(chan reply, 1)
	go func() {
		code, body, err := writeJSON(context.WithoutCancel(t.Context()), ts, sleeper, strings.Repeat("z", 4<<20))
		assert.NoError(t, err)
		blocked <- reply{code, body}
	}()
	require.Eventually(t, func() bool { return handlersIn(pipeWrite) == 1 }, 10*time.Second, 10*time.Millisecond)

	code, body := call(t, ts, "POST", "/write_stdin", map[string]any{"id": other, "data": "hi\n"})
	assert.Equal(t, http.StatusOK, code, body)
	code, body = call(t, ts, "POST", "/close_stdin", map[string]any{"id": sleeper})
	assert.Equal(t, http.StatusOK, code, body)
	code, body = call(t, ts, "POST", "/write_stdin", map[string]any{"id": sleeper, "data": "more"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "stdin is closed", body["error"])
	code, body = call(t, ts, "POST", "/kill_process", map[string]any{"id": sleeper})
	assert.Equal(t, http.StatusOK, code, body)

	select {
	case r := <-blocked:
		assert.Equal(t, http.StatusConflict, r.code)
		// EPIPE may reach the writer before the process is reaped.
		assert.Contains(t, []string{"process is not running (status: killed)", "stdin is closed: the process closed it or exited"}, r.body["error"])
		assert.Positive(t, r.body["written"]) // the pipe took some before it filled
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked write did not end with the process")
	}
	call(t, ts, "POST", "/kill_process", map[string]any{"id": other})
}

// A client that gives up on a write to a process that does not read
// leaves nothing blocked: in the JSON form the request's context ends
// with the connection; in the raw form, whose body is not read to its
// end, the write gives up once the process has read nothing for the body
// timeout.
func TestWriteStdinClientGivesUp(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startStdin(t, ts, "sleep 100", map[string]any{"stdin": true})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := writeJSON(ctx, ts, id, strings.Repeat("j", 4<<20))
		done <- err
	}()
	require.Eventually(t, func() bool { return handlersIn(pipeWrite) == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return handlersIn(writeHandler) == 0 }, 10*time.Second, 10*time.Millisecond)
	call(t, ts, "POST", "/kill_process", map[string]any{"id": id})

	// The raw form, with a short body timeout.
	ts, _ = newTestServer(t, testServer{cfg: Config{BodyTimeout: 300 * time.Millisecond}})
	id = startStdin(t, ts, "sleep 100", map[string]any{"stdin": true})

	// Chunked, so copied: the client sends 4 MiB and then nothing.
	ctx, cancel = context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(bytes.Repeat([]byte("r"), 4<<20))
		<-ctx.Done()
		pw.CloseWithError(ctx.Err())
	}()
	go func() {
		_, _, err := writeRaw(ctx, ts, id, pr)
		done <- err
	}()
	require.Eventually(t, func() bool { return handlersIn(pipeWrite) == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	require.Eventually(t, func() bool { return handlersIn(writeHandler) == 0 }, 10*time.Second, 10*time.Millisecond)

	// The raw form that the process does not read, the client still
	// waiting: 409 once the process has read nothing for the body timeout.
	pr2, pw2 := io.Pipe()
	replied := make(chan struct{})
	sender := make(chan struct{})
	go func() {
		defer close(sender)
		_, _ = pw2.Write(bytes.Repeat([]byte("s"), 4<<20))
		<-replied
		pw2.Close()
	}()
	code, body, err := writeRaw(t.Context(), ts, id, pr2)
	close(replied)
	pr2.CloseWithError(io.ErrClosedPipe)
	<-sender
	if err == nil { // the reply may race the agent closing the connection
		assert.Equal(t, http.StatusConflict, code)
		assert.Equal(t, "the process read none of its stdin for 300ms", body["error"])
	}
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": id})
	assert.Equal(t, http.StatusOK, code)
}

// A raw body of a known length past spliceMin is spliced: the reply
// closes the connection; every byte arrives; and "Expect: 100-continue",
// which curl sends for large bodies, is answered.
func TestWriteStdinLargeRawBodyIsSpliced(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startStdin(t, ts, "sha256sum", map[string]any{"stdin": true})
	data := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 1<<20)  // 5 MiB
	tr := &http.Transport{ExpectContinueTimeout: time.Minute} // waits for the 100
	defer tr.CloseIdleConnections()
	for i, chunk := range [][]byte{data[:3<<20], data[3<<20:]} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/write_stdin?id="+id, bytes.NewReader(chunk))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		req.Header.Set("Content-Type", "application/octet-stream")
		if i == 0 {
			req.Header.Set("Expect", "100-continue")
		}
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, float64(len(chunk)), body["written"])
		assert.True(t, resp.Close, "a spliced reply closes the connection")
		assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	}
	code, _ := call(t, ts, "POST", "/close_stdin", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code)
	waitStatus(t, s, id)
	sum := sha256.Sum256(data)
	assert.Equal(t, []string{hex.EncodeToString(sum[:]) + "  -"}, processLog(t, ts, id))
}

// Back-to-back spliced writes into a process that reads: each succeeds at
// once. (Before spliceOnce looked at the socket before the splice rather
// than after, data that reached the socket during a splice could make the
// writer wait for a pipe that was not full, until the body timeout.)
func TestWriteStdinSplicedBackToBack(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyTimeout: 5 * time.Second}})
	id := startStdin(t, ts, "cat >/dev/null", map[string]any{"stdin": true})
	data := bytes.Repeat([]byte("0123456789abcdef"), 5*spliceMin/16) // more than the pipe holds
	for i := range 40 {
		code, body, err := writeRaw(t.Context(), ts, id, bytes.NewReader(data))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "write %d: %v", i, body)
	}
	call(t, ts, "POST", "/close_stdin", map[string]any{"id": id})
}

// sendDeclared sends a raw write that declares n bytes and sends what body
// gives, and returns the status and reply (err is the client's).
func sendDeclared(ctx context.Context, ts *httptest.Server, id string, n int64, body io.Reader) (int, map[string]any, error) {
	return postStdin(ctx, ts, id, body, func(req *http.Request) { req.ContentLength = n })
}

// The spliced form ends, and leaves no handler behind, whichever side
// stops: a process that reads nothing (409 after the body timeout), a
// client that sends nothing (408 after it), a client that leaves, a
// process killed while the write waits for the client.
func TestWriteStdinSplicedStops(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BodyTimeout: 300 * time.Millisecond}})
	const declared = 64 << 20
	stalled := func(send int) (io.Reader, func()) { // sends send bytes, then nothing until stopped
		pr, pw := io.Pipe()
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = pw.Write(make([]byte, send))
			<-stop
			pw.CloseWithError(io.ErrUnexpectedEOF)
		}()
		return pr, func() { close(stop); pr.Close(); <-done }
	}

	sleeper := startStdin(t, ts, "sleep 100", map[string]any{"stdin": true})
	body, stop := stalled(declared) // more than the pipe and the sockets hold
	code, reply, err := sendDeclared(t.Context(), ts, sleeper, declared, body)
	stop()
	if err == nil { // the reply may race the agent closing the connection
		assert.Equal(t, http.StatusConflict, code, reply)
		assert.Equal(t, "the process read none of its stdin for 300ms", reply["error"])
		assert.Positive(t, reply["written"])
	}
	require.Eventually(t, func() bool { return handlersIn(writeHandler) == 0 }, 10*time.Second, 10*time.Millisecond)

	reader := startStdin(t, ts, "cat >/dev/null", map[string]any{"stdin": true})
	body, stop = stalled(2 << 20)
	code, reply, err = sendDeclared(t.Context(), ts, reader, declared, body)
	stop()
	if err == nil {
		assert.Equal(t, http.StatusRequestTimeout, code, reply)
		assert.Equal(t, "request body made no progress for 300ms", reply["error"])
		assert.Equal(t, float64(2<<20), reply["written"])
	}
	require.Eventually(t, func() bool { return handlersIn(writeHandler) == 0 }, 10*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	body, stop = stalled(2 << 20)
	done := make(chan error, 1)
	go func() {
		_, _, err := sendDeclared(ctx, ts, reader, declared, body)
		done <- err
	}()
	require.Eventually(t, func() bool { return handlersIn("executor.(*stdinWriter).splice") == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	stop() // else the client's transport waits for the body it is still writing
	<-done
	require.Eventually(t, func() bool { return handlersIn(writeHandler) == 0 }, 10*time.Second, 10*time.Millisecond)

	// Killed while the write waits for the client: 409, naming the status.
	// (That the kill ends the wait at once, rather than at the stall, is
	// executor's TestWriteStdinSpliceStops.)
	body, stop = stalled(2 << 20)
	replies := make(chan map[string]any, 1)
	go func() {
		code, reply, err := sendDeclared(t.Context(), ts, reader, declared, body)
		if err == nil {
			reply["status"] = float64(code)
		}
		replies <- reply
	}()
	require.Eventually(t, func() bool { return handlersIn("executor.(*stdinWriter).splice") == 1 }, 10*time.Second, 10*time.Millisecond)
	code, _ = call(t, ts, "POST", "/kill_process", map[string]any{"id": reader})
	assert.Equal(t, http.StatusOK, code)
	if reply := <-replies; reply != nil {
		assert.Equal(t, float64(http.StatusConflict), reply["status"], reply)
		assert.Equal(t, "process is not running (status: killed)", reply["error"])
	}
	stop()
	require.Eventually(t, func() bool { return handlersIn(writeHandler) == 0 }, 10*time.Second, 10*time.Millisecond)
	call(t, ts, "POST", "/kill_process", map[string]any{"id": sleeper})
}

func TestWriteStdinErrors(t *testing.T) {
	ts, s := newTestServer(t, testServer{cfg: Config{MaxBody: 1024}})
	const unknown = "00000000-0000-0000-0000-000000000000"
	code, body := call(t, ts, "POST", "/write_stdin", map[string]any{"id": unknown, "data": "x"})
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "process not found: "+unknown, body["error"])
	code, _, err := writeRaw(t.Context(), ts, unknown, strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, "POST", "/close_stdin", map[string]any{"id": unknown})
	assert.Equal(t, http.StatusNotFound, code)

	noStdin := startStdin(t, ts, "sleep 100", nil)
	code, body = call(t, ts, "POST", "/write_stdin", map[string]any{"id": noStdin, "data": "x"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "process was started without stdin", body["error"])
	code, body = call(t, ts, "POST", "/close_stdin", map[string]any{"id": noStdin})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "process was started without stdin", body["error"])
	call(t, ts, "POST", "/kill_process", map[string]any{"id": noStdin})

	ended := startStdin(t, ts, "true", map[string]any{"stdin": true})
	waitStatus(t, s, ended)
	code, body = call(t, ts, "POST", "/write_stdin", map[string]any{"id": ended, "data": "x"})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "process is not running (status: completed)", body["error"])
	code, _, err = writeRaw(t.Context(), ts, ended, strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, code)
	code, _ = call(t, ts, "POST", "/close_stdin", map[string]any{"id": ended})
	assert.Equal(t, http.StatusOK, code)

	// Over the body limit: 413 for JSON; a raw body has no limit.
	sink := startStdin(t, ts, "cat >/dev/null", map[string]any{"stdin": true})
	code, _ = call(t, ts, "POST", "/write_stdin", map[string]any{"id": sink, "data": strings.Repeat("x", 2048)})
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	code, body, err = writeRaw(t.Context(), ts, sink, strings.NewReader(strings.Repeat("x", 64<<10)))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, float64(64<<10), body["written"])

	for _, c := range []struct {
		path string
		body any
		want string
	}{
		{"/write_stdin", map[string]any{"data": "x"}, "id is required"},
		{"/write_stdin", map[string]any{"id": sink, "data": "!!", "is_base64": true}, "invalid base64"},
		{"/close_stdin", map[string]any{}, "id is required"},
		{"/run", map[string]any{"cmd": "cat", "stdin": true}, "only for /start_process"},
		{"/run_streaming", map[string]any{"cmd": "cat", "stdin": true}, "only for /start_process"},
	} {
		code, body = call(t, ts, "POST", c.path, c.body)
		assert.Equal(t, http.StatusBadRequest, code, c)
		assert.Contains(t, body["error"], c.want, c)
	}
	code, body, err = writeRaw(t.Context(), ts, "", strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body["error"], "id is required")
	call(t, ts, "POST", "/close_stdin", map[string]any{"id": sink})

	// list_processes items keep exactly their keys.
	code, body = call(t, ts, "GET", "/list_processes", nil)
	require.Equal(t, http.StatusOK, code)
	for _, item := range body["processes"].([]any) {
		for k := range item.(map[string]any) {
			assert.Contains(t, []string{"id", "pid", "status", "command", "exit_code", "started_at", "completed_at"}, k)
		}
	}
}

// BenchmarkWriteStdinRaw sends 16 MiB raw bodies into one `cat >/dev/null`
// over loopback HTTP, client included; b.SetBytes makes it MB/s.
func BenchmarkWriteStdinRaw(b *testing.B) {
	ts, s := newTestServer(b, testServer{runner: &executor.Runner{}})
	p, err := s.procs.Start(executor.Command{Cmd: "cat >/dev/null", Stdin: true})
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		code, body, err := writeRaw(b.Context(), ts, p.ID, io.MultiReader(bytes.NewReader(data))) // chunked
		if err != nil || code != http.StatusOK {
			b.Fatal(code, body, err)
		}
	}
	_ = p.CloseStdin()
}
