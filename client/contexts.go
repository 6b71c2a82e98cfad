package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"time"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

// ContextConfig is a code context for CreateContext.
type ContextConfig struct {
	Language string            // "python" or "javascript"
	Cwd      string            // the interpreter's working directory; empty means the agent's
	Env      map[string]string // added to the agent's environment; nil adds nothing
	User     string            // if not empty, the interpreter runs as that user
	// IdleTimeout deletes the context after that long without a call. If
	// zero, the agent's default (30 minutes).
	IdleTimeout time.Duration
}

// ContextInfo is a context as CreateContext returns it.
type ContextInfo struct {
	ID         string `json:"id"`
	Language   string `json:"language"`
	Generation int    `json:"generation"`
	Pid        int    `json:"pid"`
}

// CreateContext starts an interpreter whose state lasts between RunCode
// calls; it returns once the interpreter is ready.
func (c *Client) CreateContext(ctx context.Context, cfg ContextConfig) (ContextInfo, error) {
	body := map[string]any{"language": cfg.Language}
	if cfg.Cwd != "" {
		body["cwd"] = cfg.Cwd
	}
	if cfg.Env != nil {
		body["env"] = cfg.Env
	}
	if cfg.User != "" {
		body["user"] = cfg.User
	}
	if cfg.IdleTimeout > 0 {
		body["idle_timeout"] = cfg.IdleTimeout.Seconds()
	}
	var info ContextInfo
	err := c.call(ctx, http.MethodPost, "/create_context", body, &info)
	return info, err
}

// DeleteContext kills a context's interpreter and its process group.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/delete_context", map[string]string{"id": id}, nil)
}

// CodeRun is one call of RunCode.
type CodeRun struct {
	// Context is the context to run in; if empty, a fresh context of
	// Language runs the call and is removed after.
	Context  string
	Language string
	Code     string
	// Timeout, if positive, interrupts the code after that long.
	Timeout time.Duration
	// ExpectedGeneration, if positive, makes the agent refuse the call
	// (409) if the context was restarted since that generation.
	ExpectedGeneration int
	// Queue waits behind a running call rather than getting 409.
	Queue bool
}

// CodeEvent is one event of RunCode: Name is stdout, stderr, display,
// result, error or complete, and Data its JSON, valid only until the loop
// body returns.
type CodeEvent struct {
	Name string
	Data []byte
}

// RunCode runs code and yields its events as they come, complete last.
// Leaving the loop early closes the connection; the code runs on.
// An error ends the sequence: an *Error if the agent refused the call, a
// *ConnError if it could not be reached, an error wrapping
// io.ErrUnexpectedEOF if the stream was cut before complete, or ctx's.
func (c *Client) RunCode(ctx context.Context, run CodeRun) iter.Seq2[CodeEvent, error] {
	return func(yield func(CodeEvent, error) bool) {
		body := map[string]any{"code": run.Code}
		if run.Context != "" {
			body["context"] = run.Context
		} else {
			body["language"] = run.Language
		}
		if run.Timeout > 0 {
			body["timeout"] = run.Timeout.Seconds()
		}
		if run.ExpectedGeneration > 0 {
			body["expected_generation"] = run.ExpectedGeneration
		}
		if run.Queue {
			body["queue"] = true
		}
		req, err := c.newRequest(ctx, http.MethodPost, "/run_code", nil, body)
		if err != nil {
			yield(CodeEvent{}, err)
			return
		}
		resp, err := c.do(req)
		if err != nil {
			yield(CodeEvent{}, err)
			return
		}
		defer resp.Body.Close()
		rd := sse.NewReader(resp.Body)
		for {
			ev, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("run_code: the stream ended before complete: %w", io.ErrUnexpectedEOF)
				}
				yield(CodeEvent{}, ctxOr(ctx, err))
				return
			}
			name := string(ev.Name)
			if !yield(CodeEvent{Name: name, Data: ev.Data}, nil) || name == "complete" {
				return
			}
		}
	}
}
