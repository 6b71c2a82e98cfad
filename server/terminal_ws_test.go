package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/terminals"
)

// A browser's way: the token as a subprotocol beside sandbox-executor,
// from a page of another origin.
func TestTerminalSubprotocolAuth(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "echo hello; read x"})
	token := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(testSecret))
	w := dialTerminal(t, ts, id, "", &websocket.DialOptions{Subprotocols: []string{wsProtocol, token},
		HTTPHeader: http.Header{"Origin": {"http://127.0.0.1:1"}}})
	w.waitFor("hello")

	_, resp, err := websocket.Dial(t.Context(), ts.URL+"/terminal_ws?id="+id, &websocket.DialOptions{
		Subprotocols: []string{wsProtocol, wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte("wrong"))}})
	require.Error(t, err)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// Ctrl-C typed as input interrupts the foreground job; so does a signal
// message.
func TestTerminalInterrupt(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "sleep 100"})
	w := dialTerminal(t, ts, id, "", nil)
	term, err := s.terms.Get(id)
	require.NoError(t, err)
	waitForChild(t, term.PID, "sleep")
	w.send("\x03")
	w.toEnd()
	assert.Equal(t, 128+int(syscall.SIGINT), *w.exit)

	id = startTerminal(t, ts, map[string]any{"cmd": "sleep 100"})
	w = dialTerminal(t, ts, id, "", nil)
	term, err = s.terms.Get(id)
	require.NoError(t, err)
	waitForChild(t, term.PID, "sleep")
	w.control(map[string]any{"type": "signal", "signal": "SIGTERM"})
	w.toEnd()
	assert.Equal(t, 128+int(syscall.SIGTERM), *w.exit)
}

// A client that disconnects while output flows and reconnects with since
// gets every byte exactly once.
func TestTerminalResume(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	const n = 100000 // 688,895 bytes on a terminal: within the 1 MiB kept
	id := startTerminal(t, ts, map[string]any{"cmd": "read x; seq 1 " + strconv.Itoa(n)})
	w := dialTerminal(t, ts, id, "", nil)
	w.readUntil(func() bool { return w.attached != nil })
	w.send("\n")
	require.True(t, w.readUntil(func() bool { return len(w.out) > 100<<10 }))
	w.c.CloseNow() // while output flows
	first := string(w.out)
	since := w.next()

	w2 := dialTerminal(t, ts, id, "&since="+strconv.FormatUint(since, 10), nil)
	w2.toEnd()
	assert.Equal(t, since, *w2.attached)
	assert.Zero(t, w2.missed)
	want := "\r\n" + seqOutput(n) // the typed newline, echoed, then seq
	assert.True(t, want == first+string(w2.out), "every byte exactly once: want %d bytes, got %d", len(want), len(first)+len(w2.out))
	assert.Equal(t, 0, *w2.exit)
}

// A client that resumes after the ring has evicted part of what it did
// not get is told how many bytes it missed and then gets every kept byte
// exactly once, with the documented arithmetic (attached offset + missed
// + bytes received) giving the offset to resume at again, however many
// times it drops. Before the fix, attached already pointed past the
// evicted bytes and missed counted them again: the next resume skipped
// them a second time, or was refused as past the end.
func TestTerminalResumeAfterEviction(t *testing.T) {
	const ring = 64 << 10
	ts, s := newTestServer(t, testServer{terms: terminals.Options{RingBytes: ring}})
	// Part one fits the ring, so that the first client gets all of it
	// however slow it is; part two, 320 KB, is five rings' worth.
	const one, n = 2000, 50000
	partOne := "\r\n" + seqOutput(one)
	want := partOne + "\r\n" + seqOutput(n)[len(seqOutput(one)):]
	id := startTerminal(t, ts, map[string]any{"cmd": fmt.Sprintf("read x; seq 1 %d; read y; seq %d %d", one, one+1, n)})
	a := dialTerminal(t, ts, id, "", nil)
	require.True(t, a.readUntil(func() bool { return a.attached != nil }))
	a.send("\n")
	a.waitFor(seqOutput(one)[len(seqOutput(one-1)):])
	a.c.CloseNow()
	require.Equal(t, uint64(len(partOne)), a.next())
	term, err := s.terms.Get(id)
	require.NoError(t, err)
	_, err = term.Write(t.Context(), []byte("\n")) // part two, with no client attached
	require.NoError(t, err)
	waitTerminal(t, term) // all of it written: the bytes after a's are evicted but for the last ring
	require.True(t, partOne == string(a.out), "part one, whole")

	since := a.next()
	b := dialTerminal(t, ts, id, "&since="+strconv.FormatUint(since, 10), nil)
	require.True(t, b.readUntil(func() bool { return len(b.out) > 8<<10 }))
	b.c.CloseNow()
	assert.Equal(t, since, *b.attached, "attached is where the client asked to resume")
	assert.Equal(t, uint64(len(want)-ring)-since, b.missed, "missed is what was evicted from there on")

	c := dialTerminal(t, ts, id, "&since="+strconv.FormatUint(b.next(), 10), nil)
	c.toEnd()
	assert.Equal(t, b.next(), *c.attached)
	assert.Zero(t, c.missed)
	assert.Equal(t, uint64(len(want)), c.next(), "attached + missed + received is the whole stream")
	kept := string(b.out) + string(c.out)
	assert.True(t, want[len(want)-ring:] == kept, "every kept byte exactly once: want the last %d bytes, got %d", ring, len(kept))

	fresh := dialTerminal(t, ts, id, "", nil)
	fresh.toEnd()
	assert.Equal(t, uint64(len(want)-ring), *fresh.attached, "without since: the oldest byte kept")
	assert.Zero(t, fresh.missed)
	assert.True(t, want[len(want)-ring:] == string(fresh.out), "the ring, once: got %d bytes", len(fresh.out))
}

// waitTerminal waits until term has ended and all its output is stored.
func waitTerminal(t *testing.T, term *terminals.Terminal) {
	t.Helper()
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("terminal %s did not end", term.ID)
	}
}

// A client that never reads holds up neither the terminal nor another
// client; when it reads at last, it is told how many bytes it missed, and
// what it gets adds up to the whole stream.
func TestTerminalStalledClient(t *testing.T) {
	ts, s := newTestServer(t, testServer{listener: withSmallSendBuffers, terms: terminals.Options{RingBytes: 256 << 10}, cfg: Config{KeepAlive: time.Minute}})
	const n = 300000 // 2.3 MB: far more than the ring and both sockets' buffers
	id := startTerminal(t, ts, map[string]any{"cmd": "read x; seq 1 " + strconv.Itoa(n)})
	stalled := dialTerminal(t, ts, id, "", &websocket.DialOptions{Subprotocols: []string{wsProtocol},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + testSecret}}, HTTPClient: smallReceiveBufferClient()})
	live := dialTerminal(t, ts, id, "", nil)
	live.send("\n")
	live.toEnd()
	want := "\r\n" + seqOutput(n)
	assert.Equal(t, uint64(len(want)), live.next(), "attached + missed + received is the whole stream")
	assert.True(t, strings.HasSuffix(want, string(live.out[max(0, len(live.out)-(256<<10)):])), "the end of the stream, intact")
	term, err := s.terms.Get(id)
	require.NoError(t, err)
	select {
	case <-term.Done():
	default:
		t.Fatal("the exit was sent before the terminal ended")
	}

	stalled.toEnd()
	assert.Positive(t, stalled.missed)
	assert.Equal(t, uint64(len(want)), stalled.next(), "attached + missed + received is the whole stream")
	assert.True(t, strings.HasSuffix(want, string(stalled.out[max(0, len(stalled.out)-(256<<10)):])), "the end of the stream, intact")
}

// Several clients see the same output, and the input of each is applied.
func TestTerminalTwoClients(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "read a; echo got-$a; read b; echo got-$b"})
	w1 := dialTerminal(t, ts, id, "", nil)
	w2 := dialTerminal(t, ts, id, "", nil)
	w1.send("one\n")
	w1.waitFor("got-one")
	w2.waitFor("got-one")
	w2.send("two\n")
	w1.toEnd()
	w2.toEnd()
	assert.Equal(t, string(w1.out), string(w2.out))
	assert.Contains(t, string(w1.out), "got-two")
}

// Everything that decides the status is answered before the upgrade,
// as JSON.
func TestTerminalWSErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "echo 12345; read x"})
	dialTerminal(t, ts, id, "", nil).waitFor("12345")

	for _, tt := range []struct {
		query string
		code  int
	}{
		{"?id=nope", http.StatusNotFound},
		{"", http.StatusBadRequest},
		{"?id=" + id + "&since=x", http.StatusBadRequest},
		{"?id=" + id + "&since=-1", http.StatusBadRequest},
		{"?id=" + id + "&since=1000", http.StatusBadRequest},
	} {
		_, resp, err := websocket.Dial(t.Context(), ts.URL+"/terminal_ws"+tt.query, dialOptions(nil))
		require.Error(t, err, tt.query)
		require.NotNil(t, resp, tt.query)
		assert.Equal(t, tt.code, resp.StatusCode, tt.query)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), tt.query)
	}
	code, out := call(t, ts, http.MethodGet, "/terminal_ws?id="+id, nil)
	assert.Equal(t, http.StatusBadRequest, code, "not an upgrade")
	assert.Contains(t, out["error"], "needs a WebSocket upgrade")
	code, _ = call(t, ts, http.MethodGet, "/terminal_ws?id=nope", nil)
	assert.Equal(t, http.StatusNotFound, code)

	// A resume at the very end is no error: output continues from there.
	w := dialTerminal(t, ts, id, "&since=7", nil)
	w.send("\n")
	w.toEnd()
	assert.Equal(t, "\r\n", string(w.out), "the echoed newline")
}

// A text frame that is not a control message closes the connection with
// 1008 and a reason; the terminal lives on.
func TestTerminalWSProtocolErrors(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "read x"})
	for _, tt := range []struct{ frame, reason string }{
		{"ls\n", "text frames are JSON control messages; send input as binary frames"},
		{`{"type":"paste"}`, `unknown control message type "paste"`},
		{`{"type":"resize","cols":0,"rows":5}`, "cols must be between 1 and 1000"},
		{`{"type":"signal"}`, `signal needs a signal, such as "SIGINT"`},
		{`{"type":"signal","signal":"SIGNOPE"}`, "unknown signal: SIGNOPE"},
	} {
		w := dialTerminal(t, ts, id, "", nil)
		require.NoError(t, w.c.Write(t.Context(), websocket.MessageText, []byte(tt.frame)))
		w.readUntil(func() bool { return false })
		var ce websocket.CloseError
		require.True(t, errors.As(w.err, &ce), "%v", w.err)
		assert.Equal(t, websocket.StatusPolicyViolation, ce.Code, tt.frame)
		assert.Equal(t, tt.reason, ce.Reason, tt.frame)
	}
	assert.Equal(t, "running", listTerminals(t, ts)[0]["status"])
}

// A client that answers no ping is dropped; one that reads is kept.
func TestTerminalPingDrop(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{KeepAlive: 50 * time.Millisecond, StallTimeout: 200 * time.Millisecond}})
	id := startTerminal(t, ts, map[string]any{"cmd": "read x"})
	silent := dialTerminal(t, ts, id, "", nil) // never reads, so never answers a ping
	reading := dialTerminal(t, ts, id, "", nil)
	readCtx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { // reads, and so answers pings, until stopped
		for {
			if _, _, err := reading.c.Read(readCtx); err != nil {
				done <- err
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return listTerminals(t, ts)[0]["clients"] == 1.0 }, 5*time.Second, 20*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // several ping intervals: the reading client stays
	assert.Equal(t, 1.0, listTerminals(t, ts)[0]["clients"])
	stop()
	<-done
	_ = silent
}

// At shutdown the agent closes with 1001, going away.
func TestTerminalShutdown(t *testing.T) {
	base, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	ts, _ := newTestServer(t, testServer{base: base})
	id := startTerminal(t, ts, map[string]any{"cmd": "read x"})
	w := dialTerminal(t, ts, id, "", nil)
	w.readUntil(func() bool { return w.attached != nil })
	shutdown()
	w.readUntil(func() bool { return false })
	assert.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(w.err), "%v", w.err)
	assert.Nil(t, w.exit)
}

// The document checker judges a 101 upgrade: the reply of an operation
// that documents it passes, any other fails.
func TestOpenAPICheckUpgrade(t *testing.T) {
	upgrade := func(w http.ResponseWriter, r *http.Request) {
		c, err := acceptWebSocket(w, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
	for _, tt := range []struct {
		path string
		want string
	}{
		{"/terminal_ws?id=x", ""},
		{"/process_logs_streaming?id=x", "status is not supported"},
	} {
		c := newDocChecker(t, "", testSecret, http.HandlerFunc(upgrade))
		done := make(chan struct{})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(done) // httptest's Close does not wait for a hijacked connection's handler
			c.ServeHTTP(w, r)
		}))
		conn, _, err := websocket.Dial(t.Context(), ts.URL+tt.path, dialOptions(nil))
		require.NoError(t, err)
		_, _, _ = conn.Read(t.Context())
		conn.CloseNow()
		<-done
		ts.Close()
		if tt.want == "" {
			assert.Empty(t, c.errors(), tt.path)
		} else {
			assert.Contains(t, strings.Join(c.errors(), "\n"), tt.want, tt.path)
		}
	}
}
