package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/terminals"
)

// termServer configures newTerminalServer; the zero value is the defaults.
type termServer struct {
	cfg   Config
	terms terminals.Options
	// smallSendBuffers gives the server's connections 16 KiB send
	// buffers, so that a client that does not read blocks the server's
	// writes at once.
	smallSendBuffers bool
	// base, if set, is every request's base context, as the agent's
	// baseCtx: cancelling it is the agent's shutdown.
	base context.Context
}

// newTerminalServer starts the API as newTestServer does, with the
// terminals and listener ts says, its requests and replies checked
// against openapi.yaml.
func newTerminalServer(t *testing.T, ts termServer) (*httptest.Server, *terminals.Registry) {
	t.Helper()
	auth, err := NewStaticAuth(testSecret)
	require.NoError(t, err)
	runner := &executor.Runner{}
	reg := procs.NewRegistry(runner, procs.Options{})
	if ts.terms.DrainDelay == 0 {
		ts.terms.DrainDelay = 200 * time.Millisecond
	}
	terms := terminals.NewRegistry(runner, ts.terms)
	fwd := &proxy.Forwarder{}
	s := New(zerolog.Nop(), auth, Deps{Runner: runner, Procs: reg, Forwarder: fwd, Terminals: terms}, ts.cfg)
	// httptest's Close does not wait for the handlers of hijacked
	// connections: handlers counts them, so that every WebSocket handler
	// has returned (and its exchange been checked) when the test ends.
	var handlers sync.WaitGroup
	checked := openAPICheck(t, s.cfg.BasePath, s)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		checked.ServeHTTP(w, r)
	}))
	if ts.smallSendBuffers {
		srv.Listener = smallSendBuffers{srv.Listener}
	}
	srv.Listener = s.Listener(srv.Config, srv.Listener)
	if ts.base != nil {
		srv.Config.BaseContext = func(net.Listener) context.Context { return ts.base }
	}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, terms.Close(ctx))
		require.NoError(t, reg.Close(ctx))
		require.NoError(t, fwd.Close(ctx))
		handlers.Wait()
	})
	return srv, terms
}

func startTerminal(t *testing.T, ts *httptest.Server, body any) string {
	t.Helper()
	code, out := call(t, ts, http.MethodPost, "/start_terminal", body)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	assert.Equal(t, "running", out["status"])
	return out["id"].(string)
}

// wsTerm is a test's WebSocket client of a terminal: it reads frames and
// keeps what they say.
type wsTerm struct {
	t        *testing.T
	c        *websocket.Conn
	attached *uint64 // the first message's offset
	out      []byte  // binary frames, concatenated
	missed   uint64
	exit     *int
	err      error // what ended the reading: a close, or a failure
}

// dialTerminal attaches to terminal id; query is added to the URL (e.g.
// "&since=5"). Without protocols, it authenticates with the header.
func dialTerminal(t *testing.T, ts *httptest.Server, id, query string, opts *websocket.DialOptions) *wsTerm {
	t.Helper()
	c, resp, err := websocket.Dial(t.Context(), ts.URL+"/terminal_ws?id="+id+query, dialOptions(opts))
	require.NoError(t, err)
	assert.Equal(t, wsProtocol, resp.Header.Get("Sec-WebSocket-Protocol"))
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsTerm{t: t, c: c}
}

func dialOptions(opts *websocket.DialOptions) *websocket.DialOptions {
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	if len(opts.Subprotocols) == 0 {
		opts.Subprotocols = []string{wsProtocol}
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + testSecret}}
	}
	return opts
}

// readUntil reads frames until cond holds, the connection ends, or 10 s
// pass; it reports whether cond held.
func (w *wsTerm) readUntil(cond func() bool) bool {
	ctx, cancel := context.WithTimeout(w.t.Context(), 10*time.Second)
	defer cancel()
	for !cond() {
		if w.err != nil {
			return false
		}
		typ, b, err := w.c.Read(ctx)
		if err != nil {
			w.err = err
			return cond()
		}
		if typ == websocket.MessageBinary {
			require.NotNil(w.t, w.attached, "output before attached")
			w.out = append(w.out, b...)
			continue
		}
		var m struct {
			Type   string  `json:"type"`
			Offset *uint64 `json:"offset"`
			Bytes  uint64  `json:"bytes"`
			Code   *int    `json:"code"`
		}
		require.NoError(w.t, json.Unmarshal(b, &m), "%s", b)
		switch m.Type {
		case "attached":
			require.Nil(w.t, w.attached, "attached twice")
			require.NotNil(w.t, m.Offset)
			w.attached = m.Offset
		case "missed":
			require.Positive(w.t, m.Bytes)
			w.missed += m.Bytes
		case "exit":
			require.NotNil(w.t, m.Code)
			w.exit = m.Code
		default:
			w.t.Fatalf("unknown message %s", b)
		}
	}
	return true
}

func (w *wsTerm) waitFor(s string) {
	w.t.Helper()
	require.True(w.t, w.readUntil(func() bool { return strings.Contains(string(w.out), s) }),
		"waiting for %q; got %q (%v)", s, w.out, w.err)
}

// toEnd reads until the server closes, and checks that it said exit and
// closed normally.
func (w *wsTerm) toEnd() {
	w.t.Helper()
	w.readUntil(func() bool { return false })
	require.NotNil(w.t, w.exit, "no exit message; %v; output %q", w.err, w.out)
	assert.Equal(w.t, websocket.StatusNormalClosure, websocket.CloseStatus(w.err), "%v", w.err)
}

// next returns the offset of the next output byte: the attached offset,
// plus what was missed and received.
func (w *wsTerm) next() uint64 { return *w.attached + w.missed + uint64(len(w.out)) }

func (w *wsTerm) send(s string) {
	w.t.Helper()
	require.NoError(w.t, w.c.Write(w.t.Context(), websocket.MessageBinary, []byte(s)))
}

func (w *wsTerm) control(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(w.t, err)
	require.NoError(w.t, w.c.Write(w.t.Context(), websocket.MessageText, b))
}

func listTerminals(t *testing.T, ts *httptest.Server) []map[string]any {
	t.Helper()
	code, out := call(t, ts, http.MethodGet, "/list_terminals", nil)
	require.Equal(t, http.StatusOK, code)
	var items []map[string]any
	for _, v := range out["terminals"].([]any) {
		items = append(items, v.(map[string]any))
	}
	return items
}

func TestTerminalEcho(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{})
	id := startTerminal(t, ts, map[string]any{"env": map[string]string{"PS1": "$ "}})
	w := dialTerminal(t, ts, id, "", nil)
	w.send("echo $((6*7))\n")
	w.waitFor("42\r\n")
	assert.Equal(t, uint64(0), *w.attached, "from the first byte")

	items := listTerminals(t, ts)
	require.Len(t, items, 1)
	assert.Equal(t, id, items[0]["id"])
	assert.Equal(t, "running", items[0]["status"])
	assert.Equal(t, 80.0, items[0]["cols"])
	assert.Equal(t, 24.0, items[0]["rows"])
	assert.Equal(t, 1.0, items[0]["clients"])
	assert.NotContains(t, items[0], "exit_code")

	w.send("exit 3\n")
	w.toEnd()
	assert.Equal(t, 3, *w.exit)
	require.Eventually(t, func() bool { return listTerminals(t, ts)[0]["clients"] == 0.0 }, 5*time.Second, 10*time.Millisecond)
	items = listTerminals(t, ts)
	assert.Equal(t, "failed", items[0]["status"])
	assert.Equal(t, 3.0, items[0]["exit_code"])
}

// A browser's way: the token as a subprotocol beside sandbox-executor,
// from a page of another origin.
func TestTerminalSubprotocolAuth(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{})
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

func TestTerminalResize(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "stty size; read x; stty size; read x; stty size", "cols": 100, "rows": 30})
	w := dialTerminal(t, ts, id, "", nil)
	w.waitFor("30 100\r\n")
	w.control(map[string]any{"type": "resize", "cols": 132, "rows": 43})
	require.Eventually(t, func() bool { return listTerminals(t, ts)[0]["cols"] == 132.0 }, 5*time.Second, 10*time.Millisecond)
	w.send("\n")
	w.waitFor("43 132\r\n")

	code, out := call(t, ts, http.MethodPost, "/resize_terminal", map[string]any{"id": id, "cols": 50, "rows": 10})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, true, out["success"])
	w.send("\n")
	w.waitFor("10 50\r\n")
	w.toEnd()
	code, out = call(t, ts, http.MethodPost, "/resize_terminal", map[string]any{"id": id, "cols": 50, "rows": 10})
	assert.Equal(t, http.StatusConflict, code, "%v", out)
	assert.Equal(t, "terminal is not running (status: completed)", out["error"])

	for _, body := range []map[string]any{
		{"id": id, "cols": 0, "rows": 10}, {"id": id, "cols": 10, "rows": 1001}, {"id": id, "cols": 10}, {"cols": 10, "rows": 10},
	} {
		code, out = call(t, ts, http.MethodPost, "/resize_terminal", body)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %v", body, out)
	}
	code, _ = call(t, ts, http.MethodPost, "/resize_terminal", map[string]any{"id": "nope", "cols": 10, "rows": 10})
	assert.Equal(t, http.StatusNotFound, code)
}

// Ctrl-C typed as input interrupts the foreground job; so does a signal
// message.
func TestTerminalInterrupt(t *testing.T) {
	ts, terms := newTerminalServer(t, termServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "sleep 100"})
	w := dialTerminal(t, ts, id, "", nil)
	term, err := terms.Get(id)
	require.NoError(t, err)
	waitForChild(t, term.PID, "sleep")
	w.send("\x03")
	w.toEnd()
	assert.Equal(t, 128+int(syscall.SIGINT), *w.exit)

	id = startTerminal(t, ts, map[string]any{"cmd": "sleep 100"})
	w = dialTerminal(t, ts, id, "", nil)
	term, err = terms.Get(id)
	require.NoError(t, err)
	waitForChild(t, term.PID, "sleep")
	w.control(map[string]any{"type": "signal", "signal": "SIGTERM"})
	w.toEnd()
	assert.Equal(t, 128+int(syscall.SIGTERM), *w.exit)
}

// waitForChild waits until pid is, or has a child, named name: a Ctrl-C
// typed before the job runs would reach a shell that has yet to start it.
func waitForChild(t *testing.T, pid int, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		if procComm(pid) == name {
			return true
		}
		b, _ := readProc(pid, "task/"+strconv.Itoa(pid)+"/children")
		for f := range strings.FieldsSeq(b) {
			if child, _ := strconv.Atoi(f); procComm(child) == name {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
}

func procComm(pid int) string {
	s, _ := readProc(pid, "comm")
	return strings.TrimSpace(s)
}

// A client that disconnects while output flows and reconnects with since
// gets every byte exactly once.
func TestTerminalResume(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{})
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

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	return b.String()
}

// A client that never reads holds up neither the terminal nor another
// client; when it reads at last, it is told how many bytes it missed, and
// what it gets adds up to the whole stream.
func TestTerminalStalledClient(t *testing.T) {
	ts, terms := newTerminalServer(t, termServer{smallSendBuffers: true, terms: terminals.Options{RingBytes: 256 << 10},
		cfg: Config{KeepAlive: time.Minute}})
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
	term, err := terms.Get(id)
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

// smallReceiveBufferClient dials connections with a 4 KiB receive buffer,
// so that a client that does not read stops the server's writes soon.
func smallReceiveBufferClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		_ = c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		return err
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// Several clients see the same output, and the input of each is applied.
func TestTerminalTwoClients(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{})
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

func TestTerminalKill(t *testing.T) {
	ts, terms := newTerminalServer(t, termServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "sleep 100 & sleep 100"})
	w := dialTerminal(t, ts, id, "", nil)
	term, err := terms.Get(id)
	require.NoError(t, err)

	code, out := call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": id})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, "Terminal killed", out["message"])
	w.toEnd()
	assert.Equal(t, 137, *w.exit)
	items := listTerminals(t, ts)
	assert.Equal(t, "killed", items[0]["status"], "the reply comes once it has ended")
	assert.Empty(t, sessionPids(t, term.PID))

	code, out = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": id})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "terminal is not running (status: killed)", out["error"])
	code, _ = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": "nope"})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{"id": id, "signal": "SIGNOPE"})
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, ts, http.MethodPost, "/kill_terminal", map[string]any{})
	assert.Equal(t, http.StatusBadRequest, code)
}

// sessionPids returns the live processes of session sid.
func sessionPids(t *testing.T, sid int) []string {
	t.Helper()
	var pids []string
	entries, err := readDirNames("/proc")
	require.NoError(t, err)
	for _, name := range entries {
		b, err := readProcFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(b[strings.LastIndexByte(b, ')')+2:])
		if len(f) > 3 && f[3] == strconv.Itoa(sid) && f[0] != "Z" {
			pids = append(pids, name)
		}
	}
	return pids
}

func TestTerminalStartErrors(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{terms: terminals.Options{MaxRunning: 1}})
	for _, body := range []map[string]any{
		{"cols": 0}, {"rows": 1001}, {"cols": "80"}, {"cwd": "/no/such/dir"}, {"cmd": "a\x00b"},
	} {
		code, out := call(t, ts, http.MethodPost, "/start_terminal", body)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %v", body, out)
	}
	startTerminal(t, ts, map[string]any{"cmd": "sleep 100"})
	code, out := call(t, ts, http.MethodPost, "/start_terminal", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "too many running terminals (limit 1)", out["error"])
}

// Everything that decides the status is answered before the upgrade,
// as JSON.
func TestTerminalWSErrors(t *testing.T) {
	ts, _ := newTerminalServer(t, termServer{})
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
	ts, _ := newTerminalServer(t, termServer{})
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
	ts, _ := newTerminalServer(t, termServer{cfg: Config{KeepAlive: 50 * time.Millisecond, StallTimeout: 200 * time.Millisecond}})
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
	ts, _ := newTerminalServer(t, termServer{base: base})
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

// readProc returns the text of /proc/<pid>/<name>.
func readProc(pid int, name string) (string, error) {
	return readProcFile("/proc/" + strconv.Itoa(pid) + "/" + name)
}

func readProcFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
