package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// otherBody has the shapes of the bodies other than the command request:
// files, ports, kill_process and the logs stream.
type otherBody struct {
	Path        string         `json:"path"`
	Content     *string        `json:"content"`
	IsBase64    bool           `json:"is_base64"`
	Port        stringOrNumber `json:"port"`
	ID          string         `json:"id"`
	Signal      stringOrNumber `json:"signal"`
	Follow      *bool          `json:"follow"`
	LastEventID stringOrNumber `json:"last_event_id"`
}

// FuzzDecode checks that whatever bytes a body holds, decode does not
// panic, answers a client error (never a 5xx, which clients retry), and
// accepts only one JSON value with nothing but white space after it.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"cmd":"echo hi","cwd":"/tmp","env":{"A":"1"},"timeout":1.5}`,
		`{"cmd": 5}`, `[1,2]`, `{"cmd":"true"}{"cmd":"false"}`, `{"cmd":"true"} ` + "\n",
		`{"port": 8080}`, `{"port": "8080", "signal": "SIGTERM"}`, `{"signal": [15]}`,
		`{"path":"/tmp/x","content":"aGk=","is_base64":true}`, `{"id":"x","follow":false,"last_event_id":"7"}`,
		`{"timeout": 1e400}`, "{\"cmd\":\"\xff\"}", `null`, `"str"`, `{"env":{"A":null}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := decodeFuzzed[commandRequest](t, body)
		if err == nil {
			req, _ := decodeWith[commandRequest](body)
			if _, err := req.command(); err != nil {
				assertClientError(t, err)
			}
		}
		decodeFuzzed[otherBody](t, body)
		decodeFuzzed[map[string]any](t, body)
	})
}

// decodeWith decodes body as a T with a body limit of 1 KiB.
func decodeWith[T any](body []byte) (T, error) {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r = withState(r, &requestState{bodyTimeout: time.Second})
	return decode[T](httptest.NewRecorder(), r, 1024)
}

// decodeFuzzed decodes body as a T and checks the result.
func decodeFuzzed[T any](t *testing.T, body []byte) error {
	_, err := decodeWith[T](body)
	if err != nil {
		assertClientError(t, err)
		return err
	}
	trimmed := strings.Trim(string(body), " \t\r\n")
	assert.True(t, trimmed == "" || json.Valid(body), "accepted %q", body)
	return nil
}

func assertClientError(t *testing.T, err error) {
	var he *httpError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
	case errors.As(err, &he):
		assert.True(t, he.code >= 400 && he.code < 500, "status %d for %v", he.code, err)
	default:
		t.Fatalf("not a client error: %#v", err)
	}
}

// FuzzLastEventID checks that lastEventID takes the first value that is
// set, accepts exactly the decimal numbers that fit in 64 bits, and never
// panics.
func FuzzLastEventID(f *testing.F) {
	for _, seed := range [][3]string{
		{"", "", ""}, {"7", "", ""}, {"", "8", ""}, {"", "", "9"}, {" 10 ", "x", "y"},
		{"18446744073709551615", "", ""}, {"18446744073709551616", "", ""}, {"-1", "", ""},
		{"+1", "", ""}, {"0x10", "", ""}, {"1_000", "", ""}, {"00042", "", ""}, {"１", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, header, query, body string) {
		got, err := lastEventID(header, query, body)
		chosen := header
		if chosen == "" {
			chosen = query
		}
		if chosen == "" {
			chosen = body
		}
		if chosen == "" {
			require.NoError(t, err)
			assert.Zero(t, got)
			return
		}
		text := strings.TrimSpace(chosen)
		if !fitsUint64(text) {
			require.Error(t, err, "accepted %q as %d", chosen, got)
			assertClientError(t, err)
			return
		}
		require.NoError(t, err, "refused %q", chosen)
		digits := strings.TrimLeft(text, "0")
		if digits == "" {
			digits = "0"
		}
		assert.Equal(t, digits, strconv.FormatUint(got, 10))
	})
}

// fitsUint64 reports whether s is decimal digits whose value fits in 64
// bits, written without strconv.
func fitsUint64(s string) bool {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return false
	}
	s = strings.TrimLeft(s, "0")
	const maxUint64 = "18446744073709551615"
	return len(s) < len(maxUint64) || len(s) == len(maxUint64) && s <= maxUint64
}
