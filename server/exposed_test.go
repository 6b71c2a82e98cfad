package server

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

func TestHostPort(t *testing.T) {
	for host, want := range map[string]int{
		"8000-mysandbox.example.com":     8000,
		"8000-mysandbox.example.com:443": 8000,
		"65535-x":                        65535,
		"8000-":                          8000,
		"65536-x":                        0,
		"08000-x":                        0,
		"0-x":                            0,
		"8000.example.com":               0,
		"127.0.0.1:3030":                 0,
		"mysandbox-8000.example.com":     0,
		"":                               0,
		"123456-x":                       0,
		"8a-x":                           0,
	} {
		port, ok := hostPort(host)
		assert.Equal(t, want, port, host)
		assert.Equal(t, want != 0, ok, host)
	}
}

// hostGet sends GET path with Host host and header, and returns the reply
// with its body.
func hostGet(t *testing.T, ts *httptest.Server, host, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+path, nil)
	require.NoError(t, err)
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp, readString(t, resp.Body)
}

// An exposed port is reached by host name with the path untouched; a
// private one needs the token, a public one does not; the agent's token
// never reaches the app, another Authorization does; a host that names no
// exposed port reaches the API.
func TestPreviewByHost(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	app := startApp(t)
	p := strconv.Itoa(app.port)
	host := p + "-mysandbox.example.com"

	resp, _ := hostGet(t, ts, host, "/health", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "not exposed yet: the API")

	resp = request(t, ts, http.MethodPost, "/expose_port", map[string]any{"port": app.port})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"success":true,"port":`+p+`,"public":false}`, readString(t, resp.Body))

	resp, _ = hostGet(t, ts, host, "/assets/app.js", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "private: the token is needed")
	resp, body := hostGet(t, ts, host, "/assets//app.js?v=1", authed())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	got := decodeSeen(t, body)
	assert.Equal(t, "/assets//app.js?v=1", got.URI, "the path as sent, not under /proxy")
	assert.Equal(t, "127.0.0.1:"+p, got.Host)
	assert.Equal(t, host, got.Fwd["X-Forwarded-Host"])
	assert.Empty(t, got.Fwd["X-Forwarded-Prefix"])
	assert.Empty(t, got.Auth)
	resp, body = hostGet(t, ts, host, "/health", authed())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "/health", decodeSeen(t, body).URI, "the app's /health, not the agent's")

	resp = request(t, ts, http.MethodPost, "/expose_port", `{"port":"`+p+`","public":true}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	resp, body = hostGet(t, ts, host, "/page", http.Header{"Authorization": {"Basic dTpw"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "public: no token needed")
	assert.Equal(t, "Basic dTpw", decodeSeen(t, body).Auth, "the app's own credentials pass")
	_, body = hostGet(t, ts, host, "/page", authed())
	assert.Empty(t, decodeSeen(t, body).Auth, "the agent's token does not")
	resp, _ = hostGet(t, ts, host, "/missing", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp = request(t, ts, http.MethodGet, "/list_exposed_ports", nil)
	assert.JSONEq(t, `{"ports":[{"port":`+p+`,"public":true}]}`, readString(t, resp.Body))

	resp = request(t, ts, http.MethodPost, "/unexpose_port", map[string]any{"port": app.port})
	assert.JSONEq(t, `{"success":true,"port":`+p+`,"removed":true}`, readString(t, resp.Body))
	resp, _ = hostGet(t, ts, host, "/page", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "unexposed: the API, which wants the token")
	resp = request(t, ts, http.MethodPost, "/unexpose_port", map[string]any{"port": app.port})
	assert.JSONEq(t, `{"success":true,"port":`+p+`,"removed":false}`, readString(t, resp.Body))
	resp = request(t, ts, http.MethodGet, "/list_exposed_ports", nil)
	assert.JSONEq(t, `{"ports":[]}`, readString(t, resp.Body))
}

// The agent's own ports cannot be exposed; a bad port is 400.
func TestExposePortRefusals(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	for _, body := range []string{`{"port":` + strconv.Itoa(portOf(ts)) + `}`, `{}`, `{"port":0}`, `{"port":"08000"}`, `{"port":8000,"public":"yes"}`} {
		resp := request(t, ts, http.MethodPost, "/expose_port", body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		resp.Body.Close()
	}
}

// X-Forwarded-Host routes only when the agent trusts it; then it is also
// what the app sees, with the edge's X-Forwarded-Proto.
func TestPreviewForwardedHost(t *testing.T) {
	app := startApp(t)
	p := strconv.Itoa(app.port)
	fwd := http.Header{"X-Forwarded-Host": {"inner, " + p + "-box.example.com"}, "X-Forwarded-Proto": {"https"}}
	for _, trust := range []bool{false, true} {
		ts, s := newTestServer(t, testServer{cfg: Config{TrustForwardedHost: trust}, runner: &executor.Runner{}})
		s.exposed.expose(app.port, true)
		resp, body := hostGet(t, ts, ts.Listener.Addr().String(), "/health", fwd)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		if !trust {
			assert.Contains(t, body, `"status":"ok"`, "untrusted: the API")
			continue
		}
		got := decodeSeen(t, body)
		assert.Equal(t, "/health", got.URI)
		assert.Equal(t, p+"-box.example.com", got.Fwd["X-Forwarded-Host"], "the edge's entry, the last")
		assert.Equal(t, "https", got.Fwd["X-Forwarded-Proto"])
	}
}

// Unexposing a port ends the requests in flight to it by host name.
func TestUnexposeEndsStreams(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	app := startApp(t)
	s.exposed.expose(app.port, true)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/events", nil)
	require.NoError(t, err)
	req.Host = strconv.Itoa(app.port) + "-x"
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: first\n", line)
	resp2 := request(t, ts, http.MethodPost, "/unexpose_port", map[string]any{"port": app.port})
	resp2.Body.Close()
	ended := make(chan string, 1)
	go func() { // ends at the stream's end; at the latest when the test ends and the app lets go
		rest, _ := br.ReadString(0)
		ended <- rest
	}()
	select {
	case rest := <-ended:
		assert.NotContains(t, rest, "second", "the stream ended before the app's second event")
	case <-time.After(10 * time.Second):
		t.Fatal("unexpose_port did not end the stream")
	}
}

// Behind an edge that appends to X-Forwarded-Host, the client's own
// entries come first: only the last entry routes, and only it (and the
// last X-Forwarded-Proto) reaches the app.
func TestForwardedHostLastWins(t *testing.T) {
	app := startApp(t)
	p := strconv.Itoa(app.port)
	ts, s := newTestServer(t, testServer{cfg: Config{TrustForwardedHost: true}, runner: &executor.Runner{}})
	s.exposed.expose(app.port, true)
	for _, fwd := range [][]string{
		{p + "-box.example.com, agent.example.com"},
		{p + "-box.example.com", "agent.example.com"},
		{p + "-box.example.com, "},
	} {
		resp, body := hostGet(t, ts, ts.Listener.Addr().String(), "/health", http.Header{"X-Forwarded-Host": fwd})
		require.Equal(t, http.StatusOK, resp.StatusCode, fwd)
		assert.Contains(t, body, `"status":"ok"`, "%q: the client's entry does not route: the API", fwd)
	}
	resp, body := hostGet(t, ts, ts.Listener.Addr().String(), "/health", http.Header{
		"X-Forwarded-Host":  {"evil.example.com", "other, " + p + "-box.example.com"},
		"X-Forwarded-Proto": {"javascript, https"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := decodeSeen(t, body)
	assert.Equal(t, "/health", got.URI, "the edge's entry routes to the app")
	assert.Equal(t, p+"-box.example.com", got.Fwd["X-Forwarded-Host"])
	assert.Equal(t, "https", got.Fwd["X-Forwarded-Proto"])
}

// A public preview does not check Authorization, so a client may send it
// twice: no header that carries the token (Bearer, or Basic with it as the
// password) reaches the app, whichever place it takes; the app's own
// credentials do.
func TestPreviewStripsEveryToken(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	app := startApp(t)
	s.exposed.expose(app.port, true)
	host := strconv.Itoa(app.port) + "-box.example.com"
	bearer, own := "Bearer "+testSecret, "Basic dTpw"
	for _, tt := range []struct {
		sent, want []string
	}{
		{[]string{own, bearer}, []string{own}},
		{[]string{bearer, own}, []string{own}},
		{[]string{bearer, "bearer  " + testSecret}, nil},
		{[]string{"Basic " + basic(":"+testSecret), own}, []string{own}},
		{[]string{"Basic " + basic("u:"+testSecret)}, nil},
		{[]string{"Bearer other", own}, []string{"Bearer other", own}},
	} {
		resp, body := hostGet(t, ts, host, "/seen", http.Header{"Authorization": tt.sent})
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		got := decodeSeen(t, body)
		assert.Equal(t, tt.want, got.AuthAll, "sent %q", tt.sent)
		assert.NotContains(t, body, testSecret)
	}
}

// A port made private ends the requests it let in without the token while
// it was public; exposing it as public again ends nothing.
func TestPrivateEndsAnonymousRequests(t *testing.T) {
	ts, s := newTestServer(t, testServer{})
	stream := func(app *testApp) *bufio.Reader {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/events", nil)
		require.NoError(t, err)
		req.Host = strconv.Itoa(app.port) + "-x"
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, http.StatusOK, resp.StatusCode)
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "data: first\n", line)
		return br
	}
	rest := func(br *bufio.Reader) <-chan string {
		ended := make(chan string, 1)
		go func() { // ends at the stream's end; at the latest when the test ends and the app lets go
			rest, _ := br.ReadString(0)
			ended <- rest
		}()
		return ended
	}

	still := startApp(t)
	resp := request(t, ts, http.MethodPost, "/expose_port", map[string]any{"port": still.port, "public": true})
	drain(t, resp)
	br := stream(still)
	resp = request(t, ts, http.MethodPost, "/expose_port", map[string]any{"port": still.port, "public": true})
	drain(t, resp)
	still.letGo()
	select {
	case got := <-rest(br):
		assert.Contains(t, got, "data: second", "public again: the stream goes on")
	case <-time.After(10 * time.Second):
		t.Fatal("the stream neither ended nor got its second event")
	}

	app := startApp(t)
	s.exposed.expose(app.port, true)
	br = stream(app)
	resp = request(t, ts, http.MethodPost, "/expose_port", map[string]any{"port": app.port, "public": false})
	drain(t, resp)
	select {
	case got := <-rest(br):
		assert.NotContains(t, got, "second", "the stream ended before the app's second event")
	case <-time.After(10 * time.Second):
		t.Fatal("making the port private did not end the anonymous stream")
	}
	resp, _ = hostGet(t, ts, strconv.Itoa(app.port)+"-x", "/seen", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "private now")
}
