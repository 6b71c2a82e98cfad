package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func wsHeaders(protocols ...string) http.Header {
	h := http.Header{}
	h.Set("Connection", "keep-alive, Upgrade")
	h.Set("Upgrade", "websocket")
	h.Set("Sec-WebSocket-Protocol", strings.Join(protocols, ", "))
	return h
}

func TestWSToken(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString([]byte("s3cr/t+?"))
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"offered beside the protocol", wsHeaders(wsProtocol, wsTokenPrefix+enc), "s3cr/t+?"},
		{"padded", wsHeaders(wsTokenPrefix+base64.URLEncoding.EncodeToString([]byte("ab")), wsProtocol), "ab"},
		{"none", wsHeaders(wsProtocol), ""},
		{"not base64url", wsHeaders(wsProtocol, wsTokenPrefix+"a+b/"), ""},
		{"empty", wsHeaders(wsProtocol, wsTokenPrefix), ""},
		{"not an upgrade", http.Header{"Sec-WebSocket-Protocol": {wsTokenPrefix + enc}}, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header = tt.header
		got, ok := wsToken(r)
		assert.Equal(t, tt.want != "", ok, tt.name)
		assert.Equal(t, tt.want, got, tt.name)
	}
}

// A WebSocket upgrade may carry the token as a subprotocol; a wrong one,
// or one in the query string, is refused like a wrong header.
func TestWebSocketSubprotocolAuth(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	try := func(protocols []string, query string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/no_such_ws"+query, nil)
		require.NoError(t, err)
		req.Header = wsHeaders(protocols...)
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Version", "13")
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	good := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(testSecret))
	bad := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte("nope"))
	assert.Equal(t, http.StatusNotFound, try([]string{wsProtocol, good}, ""), "authenticated, then no such endpoint")
	assert.Equal(t, http.StatusUnauthorized, try([]string{wsProtocol, bad}, ""))
	assert.Equal(t, http.StatusUnauthorized, try([]string{wsProtocol}, "?token="+testSecret))
}

// acceptWebSocket selects wsProtocol, never the token's subprotocol, and
// answers a request that is not an upgrade with a JSON 400.
func TestAcceptWebSocket(t *testing.T) {
	s := &Server{}
	ts := httptest.NewServer(s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		c, err := acceptWebSocket(w, r)
		if err != nil {
			return err
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return nil
		}
		_ = c.Write(r.Context(), typ, msg)
		// After the upgrade only the WebSocket can say anything: an
		// error returned now would reach writeError on a hijacked
		// connection.
		_ = c.Close(websocket.StatusNormalClosure, "")
		return nil
	}))
	defer ts.Close()

	token := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte("t"))
	c, resp, err := websocket.Dial(t.Context(), ts.URL, &websocket.DialOptions{Subprotocols: []string{wsProtocol, token}})
	require.NoError(t, err)
	defer c.CloseNow()
	assert.Equal(t, wsProtocol, c.Subprotocol())
	assert.Equal(t, wsProtocol, resp.Header.Get("Sec-WebSocket-Protocol"))
	require.NoError(t, c.Write(t.Context(), websocket.MessageBinary, []byte("hi")))
	_, msg, err := c.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "hi", string(msg))

	resp, err = http.Get(ts.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	_, _, err = websocket.Dial(t.Context(), ts.URL, &websocket.DialOptions{Subprotocols: []string{"other"}})
	assert.Error(t, err, "a client that does not offer the protocol is refused")
}

// A client that offers no subprotocol and authenticates with the header
// (Python's websocket-client and wscat by default) is accepted, with no
// subprotocol selected, and speaks the terminal protocol all the same.
func TestWebSocketNoSubprotocol(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "read x; echo got-$x"})
	c, resp, err := websocket.Dial(t.Context(), ts.URL+"/terminal_ws?id="+id,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testSecret}}})
	require.NoError(t, err)
	defer c.CloseNow()
	assert.Empty(t, resp.Header.Values("Sec-WebSocket-Protocol"), "none selected")
	assert.Empty(t, c.Subprotocol())
	w := &wsTerm{t: t, c: c}
	w.send("hi\n")
	w.toEnd()
	assert.Equal(t, uint64(0), *w.attached)
	assert.Contains(t, string(w.out), "got-hi\r\n")
}

// An upgrade that offers subprotocols but not sandbox-executor (such as
// the browser's token, bearer.*, alone) is refused with a 400 whose status
// line and JSON body both say to offer sandbox-executor: clients that
// show only one of them (websocket-client shows both, wscat the status)
// tell the user why.
func TestWebSocketRefusal(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	id := startTerminal(t, ts, map[string]any{"cmd": "read x"})
	token := wsTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(testSecret))
	for _, tt := range []struct {
		name string
		opts *websocket.DialOptions
	}{
		{"the token alone", &websocket.DialOptions{Subprotocols: []string{token}}},
		{"another protocol", &websocket.DialOptions{Subprotocols: []string{"tty"},
			HTTPHeader: http.Header{"Authorization": {"Bearer " + testSecret}}}},
	} {
		for _, path := range []string{"/terminal_ws?id=" + id, "/tunnel_ws?port=1"} {
			_, resp, err := websocket.Dial(t.Context(), ts.URL+path, tt.opts)
			require.Error(t, err, tt.name)
			require.NotNil(t, resp, tt.name)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tt.name)
			assert.Equal(t, `400 WebSocket subprotocol "sandbox-executor" required`, resp.Status, tt.name)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), tt.name)
			var body map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body), tt.name)
			assert.Contains(t, body["error"], `"sandbox-executor"`, tt.name)
		}
	}
	assert.Equal(t, 0.0, listTerminals(t, ts)[0]["clients"], "refused before it attached")
}
