package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

// watchEvent is one event of a watch as a client reads it.
type watchEvent struct {
	ID   uint64         `json:"id"`
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// watchStream reads a watch's event stream into a channel.
type watchStream struct {
	evs  chan watchEvent
	resp *http.Response
	done sync.WaitGroup
}

// openWatch opens an event stream with the test secret and the headers
// in hdr; it is closed, and its reader waited for, when the test ends.
func openWatch(t *testing.T, ts *httptest.Server, method, path string, body any, hdr map[string]string) *watchStream {
	t.Helper()
	resp := requestWith(t, ts, method, path, body, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := &watchStream{evs: make(chan watchEvent, 1<<16), resp: resp}
	s.done.Add(1)
	go s.read()
	t.Cleanup(s.close)
	return s
}

// read parses the stream into evs.
//
// read runs in its own goroutine; it ends with the stream, which close
// ends.
func (s *watchStream) read() {
	defer s.done.Done()
	defer close(s.evs)
	r := sse.NewReader(s.resp.Body)
	for {
		ev, err := r.Next()
		if err != nil {
			return
		}
		e := watchEvent{Type: string(ev.Name)}
		e.ID, _ = strconv.ParseUint(string(ev.ID), 10, 64)
		_ = json.Unmarshal(ev.Data, &e.Data)
		s.evs <- e
	}
}

func (s *watchStream) close() {
	s.resp.Body.Close()
	s.done.Wait()
}

// until reads events until one is a change of op on path, and returns
// all read.
func (s *watchStream) until(t *testing.T, path, op string) []watchEvent {
	t.Helper()
	var got []watchEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-s.evs:
			require.True(t, ok, "the stream ended; events so far: %+v", got)
			got = append(got, e)
			if e.Type == "change" && e.Data["path"] == path && e.Data["op"] == op {
				return got
			}
		case <-deadline:
			require.FailNowf(t, "timed out", "waiting for %s of %s; events so far: %+v", op, path, got)
		}
	}
}

// requestWith is request with more headers.
func requestWith(t *testing.T, ts *httptest.Server, method, path string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	var data []byte
	if body != nil {
		var err error
		data, err = json.Marshal(body)
		require.NoError(t, err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func watchDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func shIn(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

// changes returns the ops of the change events by path, in order.
func changes(evs []watchEvent) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		if e.Type == "change" {
			p, _ := e.Data["path"].(string)
			op, _ := e.Data["op"].(string)
			out[p] = append(out[p], op)
		}
	}
	return out
}

// TestWatchStream: GET /watch streams every change with its id, what a
// directory made with `mkdir -p` held before its watch was set included;
// POST takes the same parameters as JSON; excluded directories send
// nothing.
func TestWatchStream(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := watchDir(t)
	s := openWatch(t, ts, http.MethodGet, "/watch?path="+url.QueryEscape(root)+"&exclude=*.log", nil, nil)
	shIn(t, root, "mkdir -p a/b/c && touch a/b/c/f && mkdir -p node_modules/x && touch node_modules/x/y skip.log")
	// f is moved only once it has been reported: moved away before the
	// watch on a/b/c was set, it could not be seen at all (inotify says
	// nothing of a directory not yet watched), and a/g would rightly be
	// a create.
	evs := s.until(t, filepath.Join(root, "a/b/c/f"), "create")
	shIn(t, root, "mv a/b/c/f a/g && touch marker")
	evs = append(evs, s.until(t, filepath.Join(root, "marker"), "create")...)
	assert.Equal(t, map[string][]string{
		filepath.Join(root, "a"):       {"create"},
		filepath.Join(root, "a/b"):     {"create"},
		filepath.Join(root, "a/b/c"):   {"create"},
		filepath.Join(root, "a/b/c/f"): {"create"},
		filepath.Join(root, "a/g"):     {"rename"},
		filepath.Join(root, "marker"):  {"create"},
	}, changes(evs))
	for i, e := range evs {
		assert.Equal(t, uint64(i+1), e.ID)
		if e.Data["op"] == "rename" {
			assert.Equal(t, filepath.Join(root, "a/b/c/f"), e.Data["old_path"])
		}
	}

	p := openWatch(t, ts, http.MethodPost, "/watch", map[string]any{"path": root, "include": []string{"*.go"}, "coalesce_ms": 0}, nil)
	shIn(t, root, "touch x.txt main.go")
	evs = p.until(t, filepath.Join(root, "main.go"), "create")
	assert.NotContains(t, changes(evs), filepath.Join(root, "x.txt"))
}

// TestWatchRefusals: a missing path is a 404 before any stream, bad
// parameters 400, and past -max-watches 503 naming it.
func TestWatchRefusals(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxWatches: 1}})
	root := watchDir(t)
	code, body := call(t, ts, http.MethodGet, "/watch?path="+url.QueryEscape(filepath.Join(root, "nope")), nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "no such file or directory: "+filepath.Join(root, "nope"), body["error"])
	code, _ = call(t, ts, http.MethodGet, "/watch", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, ts, http.MethodGet, "/watch?path=/tmp&coalesce_ms=-1", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, ts, http.MethodPost, "/watches", map[string]any{"path": root, "idle_timeout": -1})
	assert.Equal(t, http.StatusBadRequest, code)

	openWatch(t, ts, http.MethodGet, "/watch?path="+url.QueryEscape(root), nil, nil)
	code, body = call(t, ts, http.MethodPost, "/watches", map[string]any{"path": root})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "too many watches (limit 1, -max-watches)", body["error"])
	code, body = call(t, ts, http.MethodPost, "/wait_for_path", map[string]any{"path": root + "/x", "timeout": 1})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "too many watches (limit 1, -max-watches)", body["error"])

	code, _ = call(t, ts, http.MethodGet, "/watches/w-nope/events?timeout=1", nil)
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, ts, http.MethodDelete, "/watches/w-nope", nil)
	assert.Equal(t, http.StatusNotFound, code)
}

// TestKeptWatch: a kept watch's events come the same by long poll and by
// stream; a dropped stream resumes with Last-Event-ID without loss or
// duplicate; DELETE ends it.
func TestKeptWatch(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := watchDir(t)
	code, created := call(t, ts, http.MethodPost, "/watches", map[string]any{"path": root, "idle_timeout": 60})
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, root, created["path"])
	assert.Equal(t, 60.0, created["idle_timeout"])
	id := created["id"].(string)
	events := "/watches/" + id + "/events"
	sseHdr := map[string]string{"Accept": "text/event-stream"}

	first := openWatch(t, ts, http.MethodGet, events, nil, sseHdr)
	shIn(t, root, "touch f1 f2")
	before := first.until(t, filepath.Join(root, "f2"), "create")
	first.close() // the connection drops
	shIn(t, root, "touch f3 f4 && mkdir d && touch d/f5")
	last := before[len(before)-1].ID
	resumed := openWatch(t, ts, http.MethodGet, events, nil, map[string]string{"Accept": "text/event-stream", "Last-Event-ID": fmt.Sprint(last)})
	after := resumed.until(t, filepath.Join(root, "d/f5"), "create")
	streamed := append(before, after...)
	for i, e := range streamed {
		assert.Equal(t, uint64(i+1), e.ID, "no loss, no duplicate across the reconnection")
	}
	assert.Len(t, changes(streamed), 6)

	// The long poll gives the same events, in pages by cursor.
	var polled []watchEvent
	cursor := uint64(0)
	for len(polled) < len(streamed) {
		code, page := getJSON[struct {
			Events []watchEvent `json:"events"`
			Cursor uint64       `json:"cursor"`
		}](t, ts, fmt.Sprintf("%s?cursor=%d&timeout=5", events, cursor))
		require.Equal(t, http.StatusOK, code)
		require.NotEmpty(t, page.Events)
		polled = append(polled, page.Events...)
		cursor = page.Cursor
	}
	assert.Equal(t, streamed, polled)

	// Nothing new: an empty page after the timeout, the cursor unchanged.
	start := time.Now()
	code, page := getJSON[map[string]any](t, ts, fmt.Sprintf("%s?cursor=%d&timeout=0.2", events, cursor))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"events": []any{}, "cursor": float64(cursor)}, page)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	// A poll waiting when a change comes answers at once.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(root, "late"), nil, 0o644)
	}()
	code, late := getJSON[struct {
		Events []watchEvent `json:"events"`
	}](t, ts, fmt.Sprintf("%s?cursor=%d&timeout=30", events, cursor))
	assert.Equal(t, http.StatusOK, code)
	require.NotEmpty(t, late.Events)
	assert.Equal(t, filepath.Join(root, "late"), late.Events[0].Data["path"])

	code, _ = call(t, ts, http.MethodDelete, "/watches/"+id, nil)
	assert.Equal(t, http.StatusOK, code)
	code, _ = call(t, ts, http.MethodGet, events, nil)
	assert.Equal(t, http.StatusNotFound, code)
}

// getJSON GETs path with the test secret and decodes the reply into T.
func getJSON[T any](t *testing.T, ts *httptest.Server, path string) (int, T) {
	t.Helper()
	resp := request(t, ts, http.MethodGet, path, nil)
	defer resp.Body.Close()
	var v T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return resp.StatusCode, v
}

// TestWaitForPath: the reply comes when the path appears, its parents
// made after the call; or when it is gone; or at the timeout.
func TestWaitForPath(t *testing.T) {
	ts, _ := newTestServer(t, testServer{})
	root := watchDir(t)
	target := filepath.Join(root, "out/build/done")
	type reply struct {
		code int
		body map[string]any
	}
	got := make(chan reply, 1)
	go func() {
		code, body := call(t, ts, http.MethodPost, "/wait_for_path", map[string]any{"path": target, "timeout": 30})
		got <- reply{code, body}
	}()
	time.Sleep(100 * time.Millisecond) // the call is waiting; the test holds either way
	start := time.Now()
	shIn(t, root, "mkdir -p out/build && touch out/build/done")
	r := <-got
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, map[string]any{"path": target, "exists": true, "timed_out": false}, r.body)

	go func() {
		code, body := call(t, ts, http.MethodPost, "/wait_for_path", map[string]any{"path": target, "exists": false})
		got <- reply{code, body}
	}()
	require.NoError(t, os.RemoveAll(filepath.Join(root, "out")))
	r = <-got
	assert.Equal(t, map[string]any{"path": target, "exists": false, "timed_out": false}, r.body)

	code, body := call(t, ts, http.MethodPost, "/wait_for_path", map[string]any{"path": target, "timeout": 0.2})
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"path": target, "exists": false, "timed_out": true}, body)
	code, _ = call(t, ts, http.MethodPost, "/wait_for_path", map[string]any{"path": target, "timeout": 301})
	assert.Equal(t, http.StatusBadRequest, code)
}
