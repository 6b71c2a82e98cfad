package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// limitKeys are the keys of a request's "limits", in the order their
// errors are reported.
var limitKeys = [...]string{"cpu_seconds", "file_size_bytes", "open_files", "memory_bytes", "pids"}

// parseLimits reads a request's "limits" object: each value a positive
// integer, each key one of limitKeys, else a 400 naming the key. Absent or
// null sets no limit. Whether the runner can apply them is asked later
// (Runner.CheckLimits, a 501), so that bad values are reported first.
func parseLimits(raw json.RawMessage) (executor.Limits, error) {
	var l executor.Limits
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return l, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return l, errorf(http.StatusBadRequest, "limits must be an object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(limitKeys[:], k) {
			return l, errorf(http.StatusBadRequest, "unknown key in limits: %q (known: cpu_seconds, file_size_bytes, open_files, memory_bytes, pids)", k)
		}
	}
	dst := map[string]*int64{"cpu_seconds": &l.CPUSeconds, "file_size_bytes": &l.FileSizeBytes,
		"open_files": &l.OpenFiles, "memory_bytes": &l.MemoryBytes, "pids": &l.Pids}
	for _, k := range limitKeys {
		v, ok := m[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 {
			return l, errorf(http.StatusBadRequest, "limits.%s must be a positive integer", k)
		}
		*dst[k] = n
	}
	return l, nil
}

// checkLimits is the 501 of limits the runner cannot apply, for a request
// whose limits were parsed.
func (s *Server) checkLimits(l executor.Limits) error { return s.runner.CheckLimits(l) }
