package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// seen is what the app saw of a request.
type seen struct {
	Method, URI, Host, Auth, Protocols string
	AuthAll                            []string          // every Authorization header
	Fwd                                map[string]string // X-Forwarded-*
	Body                               int               // bytes read
}

// testApp is an app in the sandbox: it reports what it saw at /seen/*,
// answers 404 at /missing, streams events at /events (the second once
// release is closed) and echoes a WebSocket at /ws.
type testApp struct {
	ts      *httptest.Server
	port    int
	release chan struct{}
	once    sync.Once
}

// letGo lets /events send its second event.
func (a *testApp) letGo() { a.once.Do(func() { close(a.release) }) }

func startApp(t *testing.T) *testApp {
	t.Helper()
	a := &testApp{release: make(chan struct{})}
	t.Cleanup(a.letGo)
	a.ts = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.ts.Close)
	a.port = portOf(a.ts)
	return a
}

func (a *testApp) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/missing":
		http.Error(w, "the app has no such page", http.StatusNotFound)
	case r.URL.Path == "/events":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-a.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: second\n\n")
	case r.URL.Path == "/ws":
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"chat"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			_ = c.Write(r.Context(), typ, append([]byte("echo: "), msg...))
		}
	default:
		n, _ := io.Copy(io.Discard, r.Body)
		fwd := map[string]string{}
		for k, v := range r.Header {
			if strings.HasPrefix(k, "X-Forwarded-") {
				fwd[k] = strings.Join(v, ",")
			}
		}
		w.Header().Set("X-App", "yes")
		_ = json.NewEncoder(w).Encode(seen{Method: r.Method, URI: r.RequestURI, Host: r.Host,
			Auth: r.Header.Get("Authorization"), AuthAll: r.Header.Values("Authorization"), Protocols: r.Header.Get("Sec-WebSocket-Protocol"), Fwd: fwd, Body: int(n)})
	}
}

// send sends a request with the token (unless auth is false) and returns
// the reply with its body read.
func send(t *testing.T, ts *httptest.Server, method, path string, body io.Reader, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, body)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp, readString(t, resp.Body)
}

func authed() http.Header { return http.Header{"Authorization": {"Bearer " + testSecret}} }

func decodeSeen(t *testing.T, body string) seen {
	t.Helper()
	var s seen
	require.NoError(t, json.Unmarshal([]byte(body), &s), body)
	return s
}

// A request by path reaches the app with its path as sent, Host
// 127.0.0.1:PORT, the X-Forwarded-* headers, and without the token.
func TestPreviewPath(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{BasePath: "/base"}, runner: &executor.Runner{}})
	app := startApp(t)
	p := strconv.Itoa(app.port)
	for path, want := range map[string]string{
		"/proxy/" + p + "/":                        "/",
		"/proxy/" + p + "/a//b/../c%2Fd?x=1&y=%20": "/a//b/../c%2Fd?x=1&y=%20",
		"/base/proxy/" + p + "/page?q":             "/page?q",
	} {
		resp, body := send(t, ts, http.MethodGet, path, nil, authed())
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		got := decodeSeen(t, body)
		assert.Equal(t, want, got.URI, path)
		assert.Equal(t, "127.0.0.1:"+p, got.Host, path)
		assert.Empty(t, got.Auth, "the token stays with the agent")
		prefix := "/proxy/" + p
		if strings.HasPrefix(path, "/base") {
			prefix = "/base" + prefix
		}
		assert.Equal(t, map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": ts.Listener.Addr().String(),
			"X-Forwarded-Proto": "http", "X-Forwarded-Prefix": prefix}, got.Fwd, path)
		assert.Equal(t, "yes", resp.Header.Get("X-App"))
	}

	// Any method, and the body streamed to the app.
	resp, body := send(t, ts, "PROPFIND", "/proxy/"+p+"/dav", strings.NewReader(strings.Repeat("x", 1<<20)), authed())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, seen{Method: "PROPFIND", URI: "/dav", Host: "127.0.0.1:" + p, Body: 1 << 20}, decodeSeen(t, body).withoutFwd())

	// A client's X-Forwarded-Host and -Prefix are not trusted.
	resp, body = send(t, ts, http.MethodGet, "/proxy/"+p+"/", nil,
		http.Header{"Authorization": {"Bearer " + testSecret}, "X-Forwarded-Host": {"evil"}, "X-Forwarded-Prefix": {"/evil"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := decodeSeen(t, body)
	assert.Equal(t, ts.Listener.Addr().String(), got.Fwd["X-Forwarded-Host"])
	assert.Equal(t, "/proxy/"+p, got.Fwd["X-Forwarded-Prefix"])
}

func (s seen) withoutFwd() seen {
	s.Fwd = nil
	return s
}

// The app's own replies pass untouched (a 404 stays 404); an unreachable
// port is a JSON 502; the agent's own port 403; no token 401.
func TestPreviewReplies(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	app := startApp(t)
	p := strconv.Itoa(app.port)

	resp, body := send(t, ts, http.MethodGet, "/proxy/"+p+"/missing", nil, authed())
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "the app has no such page\n", body)
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))

	closed := strconv.Itoa(testutil.ClosedPort(t))
	resp, body = send(t, ts, http.MethodGet, "/proxy/"+closed+"/", nil, authed())
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.JSONEq(t, `{"error":"nothing is listening on port `+closed+` in the sandbox"}`, body)

	resp, _ = send(t, ts, http.MethodGet, "/proxy/"+strconv.Itoa(portOf(ts))+"/health", nil, authed())
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp, _ = send(t, ts, http.MethodGet, "/proxy/"+p+"/", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, _ = send(t, ts, http.MethodGet, "/proxy/0/", nil, authed())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	ts.Client().CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, _ = send(t, ts, http.MethodGet, "/proxy/"+p+"?a=1", nil, authed())
	assert.Equal(t, http.StatusPermanentRedirect, resp.StatusCode)
	assert.Equal(t, "/proxy/"+p+"/?a=1", resp.Header.Get("Location"))
}

// An event stream reaches the client event by event: the first arrives
// while the app still holds the response open.
func TestPreviewEventStream(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	app := startApp(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/proxy/"+strconv.Itoa(app.port)+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "data: first\n", line, "before the app sent the rest")
	app.letGo()
	rest := readString(t, br)
	assert.Equal(t, "\ndata: second\n\n", rest)
}

// A WebSocket upgrade passes through, authenticated by the subprotocol;
// the app sees the other subprotocols and its own Authorization header,
// never the token.
func TestPreviewWebSocket(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	app := startApp(t)
	token := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(testSecret))
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/proxy/" + strconv.Itoa(app.port) + "/ws"
	c, resp, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{Subprotocols: []string{"chat", token}})
	require.NoError(t, err)
	defer c.CloseNow()
	assert.Equal(t, "chat", resp.Header.Get("Sec-WebSocket-Protocol"))
	require.NoError(t, c.Write(t.Context(), websocket.MessageText, []byte("hi")))
	_, msg, err := c.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "echo: hi", string(msg))
	require.NoError(t, c.Close(websocket.StatusNormalClosure, ""))

	// What the app sees of such a request: an upgrade that /seen answers
	// with a plain reply.
	resp, body := send(t, ts, http.MethodGet, "/proxy/"+strconv.Itoa(app.port)+"/seen", nil,
		http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {"chat, " + token}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	got := decodeSeen(t, body)
	assert.Equal(t, "chat", got.Protocols, "the token's subprotocol is removed")
	assert.Empty(t, got.Auth)
}
