package client

import (
	"context"
	"net/http"
)

// PollOptions are what PollProcess sends besides the id. The zero value
// reads the output after the last poll's, at once.
type PollOptions struct {
	// Cursor, if not nil, is the byte offset to read from (stdout and
	// stderr together, in arrival order); nil continues after the last
	// reply the agent gave for the process.
	Cursor *int64
	// YieldMS is how long the agent may wait for the process to end
	// before it replies; 0 replies at once.
	YieldMS float64
	// Input is written to the process's stdin first; CloseStdin then
	// closes it.
	Input      string
	CloseStdin bool
	// MaxOutputBytes, if positive, keeps the head and tail of each stream
	// within that many bytes.
	MaxOutputBytes int
}

// Poll is the reply of PollProcess.
type Poll struct {
	Status         Status       `json:"status"`
	Stdout, Stderr string       // the output after the cursor
	Cursor         int64        `json:"cursor"` // the next poll's
	ExitCode       *int         `json:"exit_code"`
	Termination    *Termination `json:"termination"`
	Missed         int64        `json:"missed"`        // bytes the agent dropped before they could be read
	OmittedBytes   int64        `json:"omitted_bytes"` // bytes MaxOutputBytes left out
}

// PollProcess writes opts.Input to process id, waits up to opts.YieldMS
// for it to end, and returns its output since the cursor. An unknown id
// is an *Error with status 404.
func (c *Client) PollProcess(ctx context.Context, id string, opts PollOptions) (Poll, error) {
	body := struct {
		ID             string  `json:"id"`
		Cursor         *int64  `json:"cursor,omitempty"`
		YieldMS        float64 `json:"yield_ms,omitempty"`
		Input          string  `json:"input,omitempty"`
		CloseStdin     bool    `json:"close_stdin,omitempty"`
		MaxOutputBytes int     `json:"max_output_bytes,omitempty"`
	}{id, opts.Cursor, opts.YieldMS, opts.Input, opts.CloseStdin, opts.MaxOutputBytes}
	var r struct {
		Poll
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	}
	if err := c.call(ctx, http.MethodPost, "/poll_process", body, &r); err != nil {
		return Poll{}, err
	}
	r.Poll.Stdout, r.Poll.Stderr = r.Stdout, r.Stderr
	return r.Poll, nil
}
