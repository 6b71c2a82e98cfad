package server

import (
	"fmt"
	"net/http"

	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/sessions"
)

// Every file operation, /files and the JSON ones alike, may name who it
// acts for: "user" (a name or a uid, as /run takes it) or "session" (the
// session's user); user wins when both are given. What it creates is then
// that user's, and the kernel checks it with that user's rights. Without
// either the agent acts as itself.

// ownerFields are the fields of a JSON file operation that name who it
// acts for.
type ownerFields struct {
	User    stringOrNumber `json:"user"`
	Session string         `json:"session"`
}

// fileOwner returns the account a file operation acts for (nil: the
// agent's own), as /run looks a user up: 403 if the agent may not switch
// users, 400 for an unknown user, 404 for an unknown session.
func (s *Server) fileOwner(user, session string) (*files.Owner, error) {
	u, err := s.lookupUser(user)
	if err != nil {
		return nil, err
	}
	if u == nil && session != "" {
		if s.sessions == nil { // a server built without sessions (a test's)
			return nil, fmt.Errorf("%w: %s", sessions.ErrNotFound, session)
		}
		if u, err = s.sessions.User(session); err != nil {
			return nil, err
		}
	}
	if u == nil {
		return nil, nil
	}
	return &files.Owner{UID: u.UID, GID: u.GID, Groups: u.Groups}, nil
}

// owner is fileOwner of a JSON request's fields.
func (s *Server) owner(f ownerFields) (*files.Owner, error) {
	return s.fileOwner(string(f.User), f.Session)
}

// queryOwner is fileOwner of /files's query parameters user and session.
func (s *Server) queryOwner(r *http.Request) (*files.Owner, error) {
	q := r.URL.Query()
	return s.fileOwner(q.Get("user"), q.Get("session"))
}
