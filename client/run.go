package client

import (
	"context"
	"fmt"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"time"
)

// Command is a shell command for Run, RunStream and StartProcess. The agent
// runs it as sh -c Cmd.
type Command struct {
	Cmd string
	Cwd string            // working directory; empty means the agent's own
	Env map[string]string // added to the agent's environment; nil adds nothing
	// Timeout, if positive, is how long the command may run before the
	// agent kills its process group; it then ends with code 124. It is
	// sent in seconds.
	Timeout time.Duration
	// Session, if not empty, runs the command in that session of the
	// agent (CreateSession), whose working directory and exported
	// variables carry over between commands: a Run or RunStream command
	// that ends by itself leaves them to the next. An unknown session is
	// an *Error matching ErrSessionNotFound. (An agent without sessions
	// ignores the field and runs the command on its own.)
	Session string
	// User, if not empty, runs the command as that user (a name or a
	// numeric uid); the agent must run as root.
	User string
	// Keepalive asks RunStream's agent for ": ping" comments while the
	// command is silent, for clients and proxies that end idle
	// connections. Run and StartProcess ignore it.
	Keepalive bool
	// Input, if not empty, is written to the command's stdin, which is
	// then closed unless Stdin is set. Empty, and without Stdin, the
	// command reads /dev/null. It is sent as JSON text: binary data goes
	// through WriteStdin.
	Input string
	// Stdin keeps a background process's stdin open (after Input) for
	// WriteStdin, until CloseStdin or its end. StartProcess only: Run
	// and RunStream are refused (a 400 *Error).
	Stdin bool
}

// commandBody is a Command on the wire.
type commandBody struct {
	Cmd       string            `json:"cmd"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Timeout   float64           `json:"timeout,omitempty"`
	Session   string            `json:"session,omitempty"`
	User      string            `json:"user,omitempty"`
	Keepalive bool              `json:"keepalive,omitempty"`
	Input     string            `json:"input,omitempty"`
	Stdin     bool              `json:"stdin,omitempty"`
}

func (c Command) body(streaming bool) commandBody {
	b := commandBody{Cmd: c.Cmd, Cwd: c.Cwd, Env: c.Env, Session: c.Session, User: c.User, Keepalive: streaming && c.Keepalive,
		Input: c.Input, Stdin: c.Stdin}
	if c.Timeout > 0 {
		b.Timeout = c.Timeout.Seconds()
	}
	return b
}

// RunResult is the outcome of Run.
type RunResult struct {
	Stdout string
	Stderr string
	// Code is the exit code: 128+n if signal n ended the command, 124 if
	// its timeout did.
	Code int
	// Error is empty for a command that exited 0; else the agent's
	// words: "Non-zero exit code", or that the timeout stopped it.
	Error string
	// Truncated reports that the agent dropped the middle of a long
	// output; agents before it was added never set it.
	Truncated bool
	// SessionError, for a command of a session, says why the session did
	// not take the state the command ended with (the agent's session
	// environment budget); empty if it did, or if there is no session.
	SessionError string
}

// Run runs cmd to its end and returns its output. A command that fails is
// not an error: see RunResult.Code. The error is for a command that could
// not be run at all (an *Error: a bad cwd is a 400, the agent's caps a
// 503) or an agent that could not be reached.
func (c *Client) Run(ctx context.Context, cmd Command) (RunResult, error) {
	var r struct {
		Stdout    string `json:"stdout"`
		Stderr    string `json:"stderr"`
		Error     string `json:"error"`
		Code      int    `json:"code"`
		Truncated bool   `json:"truncated"`
		// SessionError: see RunResult.
		SessionError string `json:"session_error"`
	}
	if err := c.call(ctx, http.MethodPost, "/run", cmd.body(false), &r); err != nil {
		return RunResult{}, err
	}
	return RunResult{Stdout: r.Stdout, Stderr: r.Stderr, Code: r.Code, Error: r.Error, Truncated: r.Truncated,
		SessionError: r.SessionError}, nil
}

// RunStream runs cmd and yields its output lines as they are read, as
// EventOutput events, then one EventComplete with its exit code, after
// which the sequence ends. The command starts when the loop starts;
// leaving the loop early (or cancelling ctx) closes the connection, and
// the agent then kills the command's process group.
//
// An error ends the sequence: an *Error if the agent refused the request
// or the command could not start (the stream's error event, with status
// 200), a *ConnError if the agent could not be reached, an error wrapping
// io.ErrUnexpectedEOF if the stream was cut before complete, or ctx's
// error.
//
// Event.Data is valid only until the loop body returns.
func (c *Client) RunStream(ctx context.Context, cmd Command) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		er, closeBody, err := c.openStream(ctx, http.MethodPost, "/run_streaming", nil, nil, cmd.body(true))
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer closeBody()
		var ev Event
		for {
			if err := er.next(&ev); err != nil {
				yield(Event{}, ctxOr(ctx, err))
				return
			}
			if ev.Type != EventOutput && ev.Type != EventComplete {
				continue
			}
			if !yield(ev, nil) || ev.Type == EventComplete {
				return
			}
		}
	}
}

// openStream sends a request whose reply is an event stream and returns a
// reader of its events, and the function that closes it.
func (c *Client) openStream(ctx context.Context, method, path string, query url.Values, header http.Header, body any) (*eventReader, func(), error) {
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("%s %s: the agent answered %q, not an event stream", method, path, resp.Header.Get("Content-Type"))
	}
	return newEventReader(resp.Body), func() { resp.Body.Close() }, nil
}

// ctxOr returns ctx's error if ctx is done, which is then why a read
// failed; else err.
func ctxOr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}
