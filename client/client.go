// Package client drives a sandbox-executor agent over its HTTP API: one
// method per endpoint, with typed requests and replies, and event streams
// as iterators over typed events.
//
// Every method takes a context: cancelling it abandons the request, and for
// /run and /run_streaming the agent then kills the command's process group.
// Errors are of three kinds:
//   - *Error: the agent answered and refused (a 4xx or 5xx status), or
//     reported a failure inside a successful reply (a file operation the
//     file system refused, an error event);
//   - *ConnError: no answer at all (refused, unresolvable, timed out);
//   - the context's error, once ctx is done.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
)

// maxReply bounds a JSON reply read into memory: the agent caps file reads
// at 64 MiB, which base64 and JSON make about 86 MiB.
const maxReply = 128 << 20

// maxErrorBody bounds how much of an error reply is read for its message.
const maxErrorBody = 64 << 10

// Client sends requests to one agent. It is safe for concurrent use.
// Create it with New.
type Client struct {
	base  string // the agent's URL without a trailing slash; BASE_PATH included
	token string
	hc    *http.Client
	// spliceStdin lets SendStdin splice a pipe on a connection of its
	// own (WithSplicedStdin).
	spliceStdin bool
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc. Without it,
// http.DefaultClient is used. hc's Timeout, if set, bounds event streams as
// a whole too: prefer contexts.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// New returns a Client for the agent at baseURL, such as
// "http://127.0.0.1:3030" or, behind a BASE_PATH,
// "https://host/koyeb-sandbox"; endpoints are appended to it. token is the
// bearer secret; if empty, no Authorization header is sent (only /health
// accepts that).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("invalid agent URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("invalid agent URL %q: want http://host:port, optionally with a base path", baseURL)
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), token: token, hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// URL returns the agent's URL as New was given it, without a trailing
// slash.
func (c *Client) URL() string { return c.base }

// CloseIdleConnections closes the idle keep-alive connections of the
// Client's http.Client. A program that is done with the agent calls it so
// that no connection outlives its use.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Error is a refusal by the agent.
type Error struct {
	// StatusCode is the HTTP status of the reply. It is 200 when the agent
	// reported the failure inside a successful reply, as it does for file
	// operations the file system refused and for an event stream's error
	// event.
	StatusCode int
	// Message is the agent's own words: the "error" field of its reply,
	// else the reply's text, else the status text. For a file operation it
	// keeps the operating system's wording, such as
	// "open /x: no such file or directory".
	Message string
	// Details holds the reply's other fields, such as current_port on a
	// 409 from BindPort; nil if there are none.
	Details map[string]any
}

// Error returns Message with the status, except for a refusal reported in
// a 200 reply, which is Message alone.
func (e *Error) Error() string {
	switch e.StatusCode {
	case http.StatusOK:
		return e.Message
	case http.StatusUnauthorized:
		return "the agent refused the token (401 Unauthorized)"
	case http.StatusProxyAuthRequired:
		return "the agent refused the token (407 Proxy Authentication Required)"
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.StatusCode, http.StatusText(e.StatusCode))
}

// ErrProcessNotFound is matched by errors.Is for an agent's refusal naming
// an unknown process id, from KillProcess, ProcessLogs or FollowLogs.
var ErrProcessNotFound = errors.New("process not found")

// ErrSessionNotFound is matched by errors.Is for an agent's 404 naming an
// unknown session, from DeleteSession or a command's Session.
var ErrSessionNotFound = errors.New("session not found")

// Is reports whether the agent's words match target: ErrProcessNotFound,
// ErrSessionNotFound, or, for a file operation the file system refused (a
// 200 of the JSON operations, a 404, 403 or 409 of /files),
// fs.ErrNotExist, fs.ErrExist or fs.ErrPermission. The agent reports file
// errors in the operating system's words (it does not send codes), so
// that is what is matched.
func (e *Error) Is(target error) bool {
	if target == ErrProcessNotFound {
		return strings.HasPrefix(e.Message, "process not found")
	}
	if target == ErrSessionNotFound {
		return e.StatusCode == http.StatusNotFound && strings.HasPrefix(e.Message, "session not found")
	}
	if e.StatusCode != http.StatusOK && !isFileStatus(e.StatusCode) {
		return false
	}
	switch target {
	case fs.ErrNotExist:
		return strings.HasSuffix(e.Message, ": no such file or directory")
	case fs.ErrExist:
		return strings.HasSuffix(e.Message, ": file exists")
	case fs.ErrPermission:
		return strings.HasSuffix(e.Message, ": permission denied") ||
			strings.HasSuffix(e.Message, ": operation not permitted")
	}
	return false
}

// ConnError is a request that got no answer from the agent: the
// connection was refused, the name did not resolve, the connection broke
// before a reply.
type ConnError struct {
	URL string // the agent's URL, as the Client was given it
	Err error  // the network error
}

// Error says "cannot reach the agent at URL: " and the network's words.
func (e *ConnError) Error() string {
	return "cannot reach the agent at " + e.URL + ": " + e.Err.Error()
}

func (e *ConnError) Unwrap() error { return e.Err }

// newRequest builds a request for path (such as "/run") with the bearer
// token. body, if not nil, is sent as JSON.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// do sends req. A reply with a 2xx status is returned for the caller to
// read and close; any other becomes an *Error and its body is closed.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &ConnError{URL: c.base, Err: err}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// call sends a request whose reply is JSON and decodes it into out, if out
// is not nil.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	req, err := c.newRequest(ctx, method, path, nil, body)
	if err != nil {
		return err
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxReply)).Decode(out); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("%s %s: reading the reply: %w", method, path, err)
		}
	}
	// The rest (a newline) is read so that the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 512))
	return nil
}

// readError turns a reply with an error status into an *Error.
func readError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{StatusCode: resp.StatusCode}
	var body map[string]any
	if json.Unmarshal(b, &body) == nil {
		if msg, ok := body["error"].(string); ok {
			e.Message = msg
			delete(body, "error")
			delete(body, "success") // always false beside an error
			if len(body) > 0 {
				e.Details = body
			}
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
