package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/contexts"
)

func TestContextBusyAndQueue(t *testing.T) {
	ts := newContextServer(t, contexts.Options{})
	id := createContext(t, ts, map[string]any{"language": "python"})
	runCode(t, ts, map[string]any{"context": id, "code": "order = []"})

	first := make(chan []codeEvent, 1)
	go func() {
		resp := request(t, ts, http.MethodPost, "/run_code", map[string]any{"context": id, "code": "import time\ntime.sleep(1)\norder.append(0)"})
		defer resp.Body.Close()
		first <- readCodeEvents(t, resp.Body)
	}()
	require.Eventually(t, func() bool {
		return jsonReply(t, request(t, ts, http.MethodGet, "/context_status?id="+id, nil))["busy"] == true
	}, 10*time.Second, 10*time.Millisecond)

	busy := request(t, ts, http.MethodPost, "/run_code", map[string]any{"context": id, "code": "1"})
	assert.Equal(t, http.StatusConflict, busy.StatusCode)
	assert.Equal(t, "context is busy", jsonReply(t, busy)["error"])

	// Queued calls run in the order they came.
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := request(t, ts, http.MethodPost, "/run_code", map[string]any{"context": id, "code": fmt.Sprintf("order.append(%d)", i), "queue": true})
			defer resp.Body.Close()
			readCodeEvents(t, resp.Body)
		}()
		// Each queued before the next is sent.
		require.Eventually(t, func() bool { return queuedCalls(t, ts, id) >= i }, 5*time.Second, 5*time.Millisecond)
	}
	wg.Wait()
	<-first
	res, _ := resultText(runCode(t, ts, map[string]any{"context": id, "code": "order"}))
	assert.Equal(t, "[0, 1, 2, 3]", res)
}

func queuedCalls(t *testing.T, ts *httptest.Server, id string) int {
	t.Helper()
	resp := request(t, ts, http.MethodGet, "/metrics", nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "sandbox_http_requests_in_flight ") {
			var n float64
			fmt.Sscanf(strings.TrimPrefix(line, "sandbox_http_requests_in_flight "), "%g", &n)
			return int(n) - 2 // the metrics request itself and the running call
		}
	}
	t.Fatal("no sandbox_http_requests_in_flight in /metrics")
	return 0
}

func TestContextsEachKeepTheirState(t *testing.T) {
	ts := newContextServer(t, contexts.Options{MaxContexts: 24})
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = createContext(t, ts, map[string]any{"language": "python"})
			runCode(t, ts, map[string]any{"context": ids[i], "code": fmt.Sprintf("x = %d", i)})
		}()
	}
	wg.Wait()
	list := jsonReply(t, request(t, ts, http.MethodGet, "/list_contexts", nil))
	assert.Len(t, list["contexts"], n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _ := resultText(runCode(t, ts, map[string]any{"context": ids[i], "code": "x"}))
			assert.Equal(t, fmt.Sprint(i), res)
		}()
	}
	wg.Wait()
}
