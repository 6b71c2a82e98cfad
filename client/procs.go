package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Status is a background process's state.
type Status string

const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed" // exited 0
	StatusFailed    Status = "failed"    // exited non-zero, or died of a signal the API did not send
	StatusKilled    Status = "killed"    // after KillProcess
)

// Process describes a background process.
type Process struct {
	ID      string // the agent's UUID for it
	PID     int
	Status  Status
	Command string // empty in StartProcess's reply
	// ExitCode is nil while the process runs (and always in
	// StartProcess's reply).
	ExitCode    *int
	StartedAt   time.Time // zero if the agent did not say
	CompletedAt time.Time // zero while running
}

// StartProcess starts cmd in the background and returns its id and pid;
// cmd.Timeout, if set, kills it when it passes. The process outlives
// ctx.
func (c *Client) StartProcess(ctx context.Context, cmd Command) (Process, error) {
	var r struct {
		ID     string `json:"id"`
		PID    int    `json:"pid"`
		Status Status `json:"status"`
	}
	if err := c.call(ctx, http.MethodPost, "/start_process", cmd.body(false), &r); err != nil {
		return Process{}, err
	}
	return Process{ID: r.ID, PID: r.PID, Status: r.Status}, nil
}

// ListProcesses returns every process the agent knows, running or
// finished.
func (c *Client) ListProcesses(ctx context.Context) ([]Process, error) {
	var r struct {
		Processes []struct {
			ID          string `json:"id"`
			PID         int    `json:"pid"`
			Status      Status `json:"status"`
			Command     string `json:"command"`
			ExitCode    *int   `json:"exit_code"`
			StartedAt   string `json:"started_at"`
			CompletedAt string `json:"completed_at"`
		} `json:"processes"`
	}
	if err := c.call(ctx, http.MethodGet, "/list_processes", nil, &r); err != nil {
		return nil, err
	}
	ps := make([]Process, len(r.Processes))
	for i, p := range r.Processes {
		ps[i] = Process{ID: p.ID, PID: p.PID, Status: p.Status, Command: p.Command, ExitCode: p.ExitCode,
			StartedAt: parseTime(p.StartedAt), CompletedAt: parseTime(p.CompletedAt)}
	}
	return ps, nil
}

// parseTime parses an RFC 3339 time; empty or malformed gives zero.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// KillProcess sends signal to the process group of process id. signal is a
// name ("SIGTERM", "TERM") or a number as text, in the agent's (Linux)
// numbering; empty means SIGKILL, after which the agent answers once the
// process is gone. An unknown id is an *Error that matches
// ErrProcessNotFound; a finished process is a 400 *Error.
func (c *Client) KillProcess(ctx context.Context, id, signal string) error {
	body := struct {
		ID     string `json:"id"`
		Signal string `json:"signal,omitempty"`
	}{id, signal}
	return c.call(ctx, http.MethodPost, "/kill_process", body, nil)
}

// LogsOptions says which part of a process's log ProcessLogs and
// FollowLogs read. The zero value reads every retained line and follows
// the process until it ends.
type LogsOptions struct {
	// After is the number (Event.Seq) of the last line already seen: the
	// stream starts with the line after it, as with Last-Event-ID. Zero
	// starts at the first retained line.
	After uint64
	// NoFollow ends the stream after the lines retained now, instead of
	// following the process until it ends.
	NoFollow bool
	// MaxRetries is how many times in a row FollowLogs reconnects after
	// a failed attempt (a cut stream, an unreachable agent, a 5xx) before
	// it gives up; an attempt that delivers an event resets the count.
	// If zero, 5; if negative, none. ProcessLogs ignores it.
	MaxRetries int
	// RetryDelay is FollowLogs' wait before its first reconnection; it
	// doubles at each failure in a row, up to 5 s. If zero, 100 ms.
	// ProcessLogs ignores it.
	RetryDelay time.Duration
}

const maxRetryDelay = 5 * time.Second

func (o LogsOptions) maxRetries() int {
	switch {
	case o.MaxRetries < 0:
		return 0
	case o.MaxRetries == 0:
		return 5
	}
	return o.MaxRetries
}

func (o LogsOptions) retryDelay() time.Duration {
	if o.RetryDelay <= 0 {
		return 100 * time.Millisecond
	}
	return o.RetryDelay
}

// ProcessLogs yields the log of process id over one connection:
// EventLog lines (each with its Seq), an EventMissed first if lines after
// opts.After were already dropped, then EventComplete once the process has
// ended (or, with NoFollow, once the retained lines are sent), after which
// the sequence ends. An unknown id ends it with an *Error matching
// ErrProcessNotFound; a cut connection with an error wrapping
// io.ErrUnexpectedEOF or the network's error. FollowLogs resumes after a
// cut by itself.
//
// Event.Data is valid only until the loop body returns.
func (c *Client) ProcessLogs(ctx context.Context, id string, opts LogsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		err := c.logsOnce(ctx, id, opts.NoFollow, opts.After, func(ev Event) bool { return yield(ev, nil) })
		if err != nil && !errors.Is(err, errStopped) {
			yield(Event{}, err)
		}
	}
}

// FollowLogs is ProcessLogs that reconnects by itself: after a cut
// connection, an unreachable agent or a 5xx reply, it waits (see
// opts.RetryDelay) and resumes after the last line it yielded, with
// Last-Event-ID. Its caller sees every line the agent still retains
// exactly once and in order; lines the agent dropped while it was away
// are reported by an EventMissed. After opts.MaxRetries failed attempts in
// a row it yields the last error, wrapped.
func (c *Client) FollowLogs(ctx context.Context, id string, opts LogsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		last := opts.After
		delay := opts.retryDelay()
		for failures := 0; ; {
			progressed := false
			err := c.logsOnce(ctx, id, opts.NoFollow, last, func(ev Event) bool {
				if ev.Type == EventLog {
					if ev.Seq <= last {
						return true // already yielded, before a reconnection
					}
					last = ev.Seq
				}
				progressed = true
				return yield(ev, nil)
			})
			if err == nil || errors.Is(err, errStopped) {
				return
			}
			if !retryable(ctx, err) {
				yield(Event{}, err)
				return
			}
			if progressed {
				failures, delay = 0, opts.retryDelay()
			}
			if failures++; failures > opts.maxRetries() {
				yield(Event{}, fmt.Errorf("giving up after %d attempts in a row: %w", failures, err))
				return
			}
			if err := sleep(ctx, delay); err != nil {
				yield(Event{}, err)
				return
			}
			delay = min(2*delay, maxRetryDelay)
		}
	}
}

// errStopped is logsOnce's error when its caller's loop ended early.
var errStopped = errors.New("stopped by the caller")

// logsOnce reads one connection's log stream, after line after, passing
// each event to fn until the complete event (then it returns nil) or an
// error. If fn returns false it stops with errStopped.
func (c *Client) logsOnce(ctx context.Context, id string, noFollow bool, after uint64, fn func(Event) bool) error {
	q := url.Values{"id": {id}}
	if noFollow {
		q.Set("follow", "false")
	}
	var h http.Header
	if after > 0 {
		h = http.Header{"Last-Event-Id": {strconv.FormatUint(after, 10)}}
	}
	er, closeBody, err := c.openStream(ctx, http.MethodGet, "/process_logs_streaming", q, h, nil)
	if err != nil {
		return err
	}
	defer closeBody()
	var ev Event
	for {
		if err := er.next(&ev); err != nil {
			return ctxOr(ctx, err)
		}
		if ev.Type != EventLog && ev.Type != EventMissed && ev.Type != EventComplete {
			continue
		}
		if !fn(ev) {
			return errStopped
		}
		if ev.Type == EventComplete {
			return nil
		}
	}
}

// retryable reports whether a follower should reconnect after err: a cut
// stream, an agent it could not reach, or a 5xx (the agent's caps, a
// proxy in front of it). Refusals, malformed events and ctx's end are
// final.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *streamError
	var ce *ConnError
	var ae *Error
	switch {
	case errors.As(err, &se), errors.As(err, &ce):
		return true
	case errors.As(err, &ae):
		return ae.StatusCode >= 500
	}
	return false
}

// sleep waits for d or for ctx to end, whose error it then returns.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
