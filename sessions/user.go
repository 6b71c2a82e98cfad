package sessions

import (
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// User returns the user the session id's commands run as, nil for the
// agent's own, and marks the session used: a file written for a session
// is work in it, as a command is. An unknown id gives an error wrapping
// ErrNotFound.
func (r *Registry) User(id string) (*executor.User, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return nil, notFound(id)
	}
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
	return s.user, nil
}
