package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	return b.String()
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
