package server

import (
	"net/http"
	"strconv"
	"strings"
)

// lastEventID returns the line number a log stream resumes after: the
// first that is set of the Last-Event-ID header, the last_event_id query
// parameter and the body's last_event_id, or 0 if none is. The number is
// decimal digits, with white space around it allowed; anything else, or a
// number beyond 64 bits, is a 400.
func lastEventID(header, query, body string) (uint64, error) {
	last := header
	if last == "" {
		last = query
	}
	if last == "" {
		last = body
	}
	if last == "" {
		return 0, nil
	}
	after, err := strconv.ParseUint(strings.TrimSpace(last), 10, 64)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "Last-Event-ID must be a line number")
	}
	return after, nil
}
