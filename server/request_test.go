package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// passThrough is the most trivial ResponseWriter wrapper a handler or a
// middleware could put between the access layer and the rest: it only
// forwards, and unwraps for http.ResponseController.
type passThrough struct{ http.ResponseWriter }

func (p passThrough) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// newAccessServer serves h behind the access layer of a Server with cfg,
// as the agent serves its router, but with nothing else in between.
func newAccessServer(t *testing.T, cfg Config, h http.HandlerFunc) (*Server, *httptest.Server) {
	t.Helper()
	s := New(zerolog.Nop(), &Auth{}, Deps{}, cfg)
	ts := httptest.NewServer(s.access(h))
	t.Cleanup(func() {
		ts.Close()
		assert.NoError(t, s.Close(context.Background()))
	})
	return s, ts
}

// sendHead sends head (a request line and headers, and whatever of the
// body) on a new connection to ts, and returns the reply and its body.
func sendHead(t *testing.T, ts *httptest.Server, head string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, head)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// The request state rides in the request's context: a ResponseWriter
// wrapped between the access layer and a handler keeps the request id,
// the body timeout, the budget of large bodies and the guard against a
// second status. With the state read from a type assertion on the
// ResponseWriter, each of them was silently off behind such a wrapper.
func TestRequestStateSurvivesAWrappedResponseWriter(t *testing.T) {
	const timeout = 200 * time.Millisecond
	cfg := Config{BodyTimeout: timeout, BodyBudget: 2 << 20}
	// The id the handler sees, and the reply's.
	ids := make(chan [2]string, 1)
	var s *Server // set before the first request
	s, ts := newAccessServer(t, cfg, func(w http.ResponseWriter, r *http.Request) {
		w = passThrough{w}
		switch r.URL.Path {
		case "/decode":
			ids <- [2]string{requestID(r), w.Header().Get(requestIDHeader)}
			if _, err := decode[map[string]any](w, r, 64<<20); err != nil {
				s.writeError(w, r, err)
			}
		case "/started":
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "partial")
			s.writeError(w, r, errorf(http.StatusInternalServerError, "failed midway"))
		}
	})

	t.Run("request id and body timeout", func(t *testing.T) {
		start := time.Now()
		resp, body := sendHead(t, ts, "POST /decode HTTP/1.1\r\nHost: x\r\nX-Request-Id: req-1\r\nContent-Length: 100\r\n\r\n{")
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, body)
		assert.Less(t, time.Since(start), 5*time.Second, "the server's BodyTimeout, not the default of 30 s")
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &e))
		assert.Equal(t, "request body not received within 200ms", e["error"])
		got := <-ids
		assert.Equal(t, [2]string{"req-1", "req-1"}, got)
	})

	t.Run("body budget", func(t *testing.T) {
		require.True(t, s.bodies.TryAcquire(cfg.BodyBudget), "the budget is taken by others")
		defer s.bodies.Release(cfg.BodyBudget)
		resp, body := sendHead(t, ts, "POST /decode HTTP/1.1\r\nHost: x\r\nContent-Length: 1500000\r\n\r\n")
		<-ids
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
		assert.Contains(t, body, "too many large request bodies at once")
	})

	t.Run("no second status", func(t *testing.T) {
		resp, err := http.Get(ts.URL + "/started")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "partial", string(b))
	})
}
