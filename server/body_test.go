package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// progressReader lets a body take as long as it needs while it makes
// progress, and cuts it when it stalls.
func TestProgressReader(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = withState(r, &requestState{bodyTimeout: idle})
		body := newProgressReader(w, r)
		n, err := io.Copy(io.Discard, body)
		body.Done()
		encode(w, http.StatusOK, map[string]any{"n": n, "timeout": errors.Is(err, os.ErrDeadlineExceeded)})
	}))
	defer ts.Close()

	upload := func(total int, stallAfter int) map[string]any {
		c := dialRaw(t, ts.Listener.Addr().String())
		c.send(t, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(total)+"\r\n\r\n")
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the trickle: a byte every idle/3; it ends at stallAfter or the first failed write
			defer wg.Done()
			for i := range stallAfter {
				if _, err := c.Write([]byte{byte('a' + i%26)}); err != nil {
					return
				}
				time.Sleep(idle / 3)
			}
		}()
		defer wg.Wait()
		resp, body := c.response(t)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &out))
		out["close"] = resp.Close
		return out
	}
	// 15 bytes at idle/3 take 5 idles: more than the timeout in all.
	assert.Equal(t, map[string]any{"n": 15.0, "timeout": false, "close": false}, upload(15, 15))
	// Cut: the reply closes the connection, without waiting for the rest.
	assert.Equal(t, map[string]any{"n": 3.0, "timeout": true, "close": true}, upload(15, 3))
}
