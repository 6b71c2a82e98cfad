package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// SessionConfig describes a session for CreateSession. Zero fields take the
// agent's defaults.
type SessionConfig struct {
	// ID is the session's id, 1 to 128 of A-Z a-z 0-9 . _ -, such as the
	// client's own thread id. If empty, the agent makes a UUID.
	ID string
	// TempWorkdir makes a fresh private directory the session's working
	// directory; it is removed with the session. Cwd is then ignored.
	TempWorkdir bool
	// Cwd is where the session's commands start until one changes it. If
	// empty, the agent's own directory.
	Cwd string
	// Env is laid over the agent's environment for the session.
	Env map[string]string
	// User is a user name or numeric uid the session's commands run as;
	// the agent must run as root. If empty, the agent's own user.
	User string
	// IdleTimeout, if positive, has the agent delete the session once
	// none of its commands has run for that long.
	IdleTimeout time.Duration
	// Timeout is the timeout of the session's Run and RunStream commands
	// that set none.
	Timeout time.Duration
	// Reuse makes CreateSession return the session that has ID if there
	// is one, rather than an error.
	Reuse bool
}

// Session describes a session of the agent.
type Session struct {
	ID   string
	Cwd  string // where its next command starts
	User string // who its commands run as
	// CreatedAt and LastUsedAt are zero in CreateSession's reply.
	CreatedAt  time.Time
	LastUsedAt time.Time
	// Running is how many of its commands and background processes run;
	// 0 in CreateSession's reply.
	Running int
}

// CreateSession creates a session and returns it with created true; with
// cfg.Reuse, an id that exists gives that session as it is, with created
// false. An id that exists without Reuse is an *Error with status 409; a
// User when the agent is not root, 403.
func (c *Client) CreateSession(ctx context.Context, cfg SessionConfig) (s Session, created bool, err error) {
	body := struct {
		ID          string            `json:"id,omitempty"`
		Workdir     string            `json:"workdir,omitempty"`
		Cwd         string            `json:"cwd,omitempty"`
		Env         map[string]string `json:"env,omitempty"`
		User        string            `json:"user,omitempty"`
		IdleTimeout float64           `json:"idle_timeout,omitempty"`
		Timeout     float64           `json:"timeout,omitempty"`
		Reuse       bool              `json:"reuse,omitempty"`
	}{ID: cfg.ID, Cwd: cfg.Cwd, Env: cfg.Env, User: cfg.User, Reuse: cfg.Reuse,
		IdleTimeout: cfg.IdleTimeout.Seconds(), Timeout: cfg.Timeout.Seconds()}
	if cfg.TempWorkdir {
		body.Workdir = "temp"
	}
	req, err := c.newRequest(ctx, http.MethodPost, "/create_session", nil, body)
	if err != nil {
		return Session{}, false, err
	}
	resp, err := c.do(req)
	if err != nil {
		return Session{}, false, err
	}
	defer resp.Body.Close()
	var r sessionReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&r); err != nil {
		return Session{}, false, fmt.Errorf("POST /create_session: reading the reply: %w", ctxOr(ctx, err))
	}
	return r.session(), resp.StatusCode == http.StatusCreated, nil
}

// sessionReply is a session on the wire.
type sessionReply struct {
	ID         string `json:"id"`
	Cwd        string `json:"cwd"`
	User       string `json:"user"`
	CreatedAt  string `json:"created_at"`
	LastUsedAt string `json:"last_used_at"`
	Running    int    `json:"running"`
}

func (r sessionReply) session() Session {
	return Session{ID: r.ID, Cwd: r.Cwd, User: r.User, CreatedAt: parseTime(r.CreatedAt),
		LastUsedAt: parseTime(r.LastUsedAt), Running: r.Running}
}

// ListSessions returns every session of the agent, oldest first.
func (c *Client) ListSessions(ctx context.Context) ([]Session, error) {
	var r struct {
		Sessions []sessionReply `json:"sessions"`
	}
	if err := c.call(ctx, http.MethodGet, "/list_sessions", nil, &r); err != nil {
		return nil, err
	}
	ss := make([]Session, len(r.Sessions))
	for i, s := range r.Sessions {
		ss[i] = s.session()
	}
	return ss, nil
}

// DeleteSession deletes session id: the agent kills every process group
// started in it and removes its temp workdir. An unknown id is an *Error
// that matches ErrSessionNotFound.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/delete_session", map[string]string{"id": id}, nil)
}
