package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sandbox-executor/sandbox-executor/procs"
)

// Bounds of a restart policy's delays, in milliseconds: a floor that keeps
// a crashing command from spinning, a ceiling of an hour.
const (
	minBackoffMS = 10
	maxBackoffMS = 3_600_000
)

// parseRestart reads /start_process's "restart": absent or null is none.
func parseRestart(raw json.RawMessage) (*procs.RestartPolicy, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var req struct {
		Policy       string `json:"policy"`
		MaxRestarts  *int   `json:"max_restarts"`
		BackoffMS    *int64 `json:"backoff_ms"`
		MaxBackoffMS *int64 `json:"max_backoff_ms"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, errorf(http.StatusBadRequest, `restart must be an object: {"policy", "max_restarts"?, "backoff_ms"?, "max_backoff_ms"?} with integers`)
	}
	switch req.Policy {
	case procs.RestartNever, procs.RestartOnFailure, procs.RestartAlways:
	default:
		return nil, errorf(http.StatusBadRequest, `restart.policy must be "never", "on-failure" or "always"`)
	}
	p := &procs.RestartPolicy{Policy: req.Policy, MaxRestarts: 10, Backoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
	if req.MaxRestarts != nil {
		if *req.MaxRestarts < -1 {
			return nil, errorf(http.StatusBadRequest, "restart.max_restarts must be -1 (no limit) or more")
		}
		p.MaxRestarts = *req.MaxRestarts
	}
	for _, f := range []struct {
		name string
		v    *int64
		dst  *time.Duration
	}{{"backoff_ms", req.BackoffMS, &p.Backoff}, {"max_backoff_ms", req.MaxBackoffMS, &p.MaxBackoff}} {
		if f.v == nil {
			continue
		}
		if *f.v < minBackoffMS || *f.v > maxBackoffMS {
			return nil, errorf(http.StatusBadRequest, "restart.%s must be between %d and %d", f.name, minBackoffMS, maxBackoffMS)
		}
		*f.dst = time.Duration(*f.v) * time.Millisecond
	}
	if p.MaxBackoff < p.Backoff {
		p.MaxBackoff = p.Backoff
	}
	return p, nil
}
