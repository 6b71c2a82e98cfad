package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

// WriteStdin streams r into the stdin of background process id, which
// must have been started with Command.Stdin, and returns how many bytes
// were written: all of r's, or, with an error, the part the process took
// before it. It uses the raw form of /write_stdin, so r may be of any
// size and is sent as it is read; the agent writes it whole, never
// interleaved with another request's data. r is not closed. A body whose
// length is known (a bytes or strings reader, a regular file, an
// io.SectionReader) goes with a Content-Length, which lets the agent
// splice one of a megabyte or more; others go chunked.
//
// The reply comes once the process has taken all of the data. If the
// process reads none of it for the agent's body timeout (30 s by
// default), the write fails with a 409 *Error; a process that has ended,
// has closed its stdin, or was started without it is a 409 *Error too,
// an unknown id an *Error matching ErrProcessNotFound.
func (c *Client) WriteStdin(ctx context.Context, id string, r io.Reader) (int64, error) {
	length, known := knownLength(r)
	if rc, ok := r.(io.ReadCloser); ok {
		r = struct{ io.Reader }{rc} // net/http would close it
	}
	req, err := c.stdinRequest(ctx, id, r, length, known)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(req)
	if err != nil {
		return writtenBefore(err), err
	}
	n, err := stdinReply(resp)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, ctxErr
		}
	}
	return n, err
}

// stdinRequest returns the raw /write_stdin request that sends body into
// the stdin id names: with a Content-Length of n if known (and no body
// at all for none), else chunked. NewRequest sets the length of the
// readers whose length it knows (bytes.Reader, strings.Reader,
// bytes.Buffer); for the others knownLength knows.
func (c *Client) stdinRequest(ctx context.Context, id string, body io.Reader, n int64, known bool) (*http.Request, error) {
	u := c.base + "/write_stdin?" + url.Values{"id": {id}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, err
	}
	if known {
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
		}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return req, nil
}

// stdinReply reads the reply of a raw /write_stdin: how many bytes went
// in, or the agent's refusal with the part the process took before it.
func stdinReply(resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		err := readError(resp)
		return writtenBefore(err), err
	}
	var reply struct {
		Written int64 `json:"written"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&reply); err != nil {
		return 0, fmt.Errorf("POST /write_stdin: reading the reply: %w", err)
	}
	return reply.Written, nil
}

// knownLength returns how many bytes are left to read in r, if r is a
// regular file or an io.SectionReader: sent with a Content-Length rather
// than chunked, a body of a megabyte or more is moved by the agent with
// splice(2), without copying it.
func knownLength(r io.Reader) (int64, bool) {
	var size int64
	var seeker io.Seeker
	switch v := r.(type) {
	case *io.SectionReader:
		size, seeker = v.Size(), v
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0, false
		}
		size, seeker = fi.Size(), v
	default:
		return 0, false
	}
	at, err := seeker.Seek(0, io.SeekCurrent)
	if err != nil || at > size {
		return 0, false
	}
	return size - at, true
}

// writtenBefore returns the "written" of an agent's error reply: how much
// went in before the error.
func writtenBefore(err error) int64 {
	var e *Error
	if errors.As(err, &e) {
		if n, ok := e.Details["written"].(float64); ok {
			return int64(n)
		}
	}
	return 0
}

// CloseStdin closes the stdin of background process id: it reads EOF
// after what was written before (a WriteStdin still in progress is not
// cut). Closing again, or after the process has ended, succeeds. A process
// started without Command.Stdin is a 409 *Error; an unknown id an *Error
// matching ErrProcessNotFound.
func (c *Client) CloseStdin(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/close_stdin", map[string]string{"id": id}, nil)
}
