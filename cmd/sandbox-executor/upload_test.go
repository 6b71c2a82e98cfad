package main

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// SANDBOX_MAX_UPLOAD reaches the server: an upload over it is 413.
func TestMaxUploadSetting(t *testing.T) {
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret, "SANDBOX_MAX_UPLOAD": "1KiB"}, options{})
	p := url.QueryEscape(filepath.Join(t.TempDir(), "f"))
	code, body := a.do(t, http.MethodPut, "/files?path="+p, testSecret, strings.Repeat("x", 1025))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.JSONEq(t, `{"error":"upload larger than the limit of 1024 bytes","max_bytes":1024}`, body)
	code, _ = a.do(t, http.MethodPut, "/files?path="+p, testSecret, strings.Repeat("x", 1024))
	assert.Equal(t, http.StatusCreated, code)
}
