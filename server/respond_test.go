package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/sessions"
)

// replyOf reads the typed errors first, then the first row of the table
// that a wrapped sentinel matches; anything else is a 500 that says
// nothing of its cause.
func TestReplyOf(t *testing.T) {
	type reply struct {
		code  int
		msg   string
		extra map[string]any
	}
	for _, tc := range []struct {
		name string
		err  error
		want reply
	}{
		{"httpError", errorf(http.StatusTeapot, "short and stout"), reply{http.StatusTeapot, "short and stout", nil}},
		{"httpError before its cause", &httpError{code: http.StatusConflict, msg: "taken", cause: sessions.ErrNotFound},
			reply{http.StatusConflict, "taken", nil}},
		{"body too large", fmt.Errorf("reading: %w", &http.MaxBytesError{Limit: 10}),
			reply{http.StatusRequestEntityTooLarge, "request body too large (limit 10 bytes)", nil}},
		{"wrapped sentinel", fmt.Errorf("%w: x", sessions.ErrNotFound), reply{http.StatusNotFound, sessions.ErrNotFound.Error() + ": x", nil}},
		{"extra fields", fmt.Errorf("%w: 42", procs.ErrNotFound),
			reply{http.StatusBadRequest, procs.ErrNotFound.Error() + ": 42", map[string]any{"success": false}}},
		{"bare", fmt.Errorf("bind 0: %w", proxy.ErrInvalidPort), reply{http.StatusBadRequest, proxy.ErrInvalidPort.Error(), nil}},
		{"unknown", errors.New("open /secret/path: permission denied"), reply{http.StatusInternalServerError, "internal error", nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, extra := replyOf(tc.err)
			assert.Equal(t, tc.want, reply{code, msg, extra})
		})
	}
}
