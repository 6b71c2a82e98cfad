package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
)

// Terminal describes a terminal: a program on a pseudo-terminal of its
// own in the sandbox.
type Terminal struct {
	ID      string // the agent's UUID for it
	PID     int    // its session leader's
	Status  Status // StatusKilled after KillTerminal
	Command string // the command, or the login shell's path; empty in StartTerminal's reply
	// Cols and Rows are its size; zero in StartTerminal's reply.
	Cols, Rows int
	// ExitCode is nil while it runs (and always in StartTerminal's reply).
	ExitCode *int
	Clients  int // WebSocket clients attached now
}

// TerminalOptions say what StartTerminal starts. The zero value starts
// the login shell, 80 columns by 24 rows.
type TerminalOptions struct {
	// Cmd, if not empty, runs as sh -c Cmd; if empty, the login shell
	// runs interactively.
	Cmd string
	Cwd string            // working directory; empty means the agent's
	Env map[string]string // added to the agent's environment; TERM is xterm-256color unless set
	// Cols and Rows are the initial size, 1 to 1000 each; zero means 80
	// and 24.
	Cols, Rows int
	// Session, if set, starts the terminal from that session's state, as
	// its user; it dies with the session. User, if set, runs it as that
	// user (a name or a uid; the agent must run as root).
	Session, User string
}

// StartTerminal starts a terminal. It outlives ctx and every client:
// it ends by itself, by KillTerminal, or when the agent stops.
func (c *Client) StartTerminal(ctx context.Context, opts TerminalOptions) (Terminal, error) {
	body := struct {
		Cmd     string            `json:"cmd,omitempty"`
		Cwd     string            `json:"cwd,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		Cols    int               `json:"cols,omitempty"`
		Rows    int               `json:"rows,omitempty"`
		Session string            `json:"session,omitempty"`
		User    string            `json:"user,omitempty"`
	}{opts.Cmd, opts.Cwd, opts.Env, opts.Cols, opts.Rows, opts.Session, opts.User}
	var r struct {
		ID     string `json:"id"`
		PID    int    `json:"pid"`
		Status Status `json:"status"`
	}
	if err := c.call(ctx, http.MethodPost, "/start_terminal", body, &r); err != nil {
		return Terminal{}, err
	}
	return Terminal{ID: r.ID, PID: r.PID, Status: r.Status}, nil
}

// ListTerminals returns every terminal the agent knows, running or
// finished.
func (c *Client) ListTerminals(ctx context.Context) ([]Terminal, error) {
	var r struct {
		Terminals []struct {
			ID       string `json:"id"`
			PID      int    `json:"pid"`
			Status   Status `json:"status"`
			Command  string `json:"command"`
			Cols     int    `json:"cols"`
			Rows     int    `json:"rows"`
			ExitCode *int   `json:"exit_code"`
			Clients  int    `json:"clients"`
		} `json:"terminals"`
	}
	if err := c.call(ctx, http.MethodGet, "/list_terminals", nil, &r); err != nil {
		return nil, err
	}
	ts := make([]Terminal, len(r.Terminals))
	for i, t := range r.Terminals {
		ts[i] = Terminal{ID: t.ID, PID: t.PID, Status: t.Status, Command: t.Command, Cols: t.Cols, Rows: t.Rows,
			ExitCode: t.ExitCode, Clients: t.Clients}
	}
	return ts, nil
}

// ResizeTerminal sets a terminal's size, 1 to 1000 columns and rows; its
// program gets SIGWINCH. An unknown id is an *Error with status 404, a
// terminal that has ended 409.
func (c *Client) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	body := struct {
		ID   string `json:"id"`
		Cols int    `json:"cols"`
		Rows int    `json:"rows"`
	}{id, cols, rows}
	return c.call(ctx, http.MethodPost, "/resize_terminal", body, nil)
}

// KillTerminal sends signal (a name such as "SIGTERM" or a number; empty
// means SIGKILL) to every process of the terminal's session. With SIGKILL
// it returns once the terminal has ended. An unknown id is an *Error with
// status 404; a terminal with nothing of its session left, 409.
func (c *Client) KillTerminal(ctx context.Context, id, signal string) error {
	body := struct {
		ID     string `json:"id"`
		Signal string `json:"signal,omitempty"`
	}{id, signal}
	return c.call(ctx, http.MethodPost, "/kill_terminal", body, nil)
}

// TerminalConn is a WebSocket attached to a terminal: Read returns its
// output and what the agent says of it, Write types into it. Read must be
// called by one goroutine at a time; the other methods may be called
// concurrently with it and with each other. Close it when done.
type TerminalConn struct {
	ws     *websocket.Conn
	next   uint64 // offset of the next output byte
	exited bool   // the exit message has been read
}

// TerminalEvent is one thing a TerminalConn read. Exactly one field is
// set.
type TerminalEvent struct {
	// Output is output of the terminal, raw bytes, which may end in the
	// middle of a UTF-8 character or an escape sequence.
	Output []byte
	// Missed is how many bytes of output the agent no longer had when
	// this client was to get them (it fell behind, or resumed too late):
	// they come before the next Output.
	Missed uint64
	// Exit is the exit code of the terminal's program (128+n after death
	// by signal n), once it has ended and all its output has been read.
	// The next Read returns io.EOF.
	Exit *int
}

// AttachTerminal connects to terminal id over a WebSocket, at output
// offset since: the offset a previous TerminalConn's Offset returned, to
// resume with no byte lost or repeated (while the agent keeps them); a
// negative since starts at the oldest byte the agent keeps (its screen so
// far). If the agent has evicted bytes from since on, the first Read
// returns a Missed event for exactly those, then the bytes kept. ctx
// bounds the connecting only. An unknown id is an *Error with status 404;
// a since past the end, 400.
func (c *Client) AttachTerminal(ctx context.Context, id string, since int64) (*TerminalConn, error) {
	q := url.Values{"id": {id}}
	if since >= 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	opts := &websocket.DialOptions{HTTPClient: c.hc, Subprotocols: []string{"sandbox-executor"}}
	if c.token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + c.token}}
	}
	ws, resp, err := websocket.Dial(ctx, c.base+"/terminal_ws?"+q.Encode(), opts)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, readError(resp)
		}
		return nil, &ConnError{URL: c.base, Err: err}
	}
	ws.SetReadLimit(1 << 20) // the agent's output frames are 32 KiB
	t := &TerminalConn{ws: ws}
	var m terminalMessage
	if err := t.readMessage(ctx, &m); err != nil {
		ws.CloseNow()
		return nil, err
	}
	if m.Type != "attached" || m.Offset == nil {
		ws.CloseNow()
		return nil, fmt.Errorf("terminal %s: the agent's first message is %q, not attached", id, m.Type)
	}
	t.next = *m.Offset
	return t, nil
}

// terminalMessage is a control message from the agent.
type terminalMessage struct {
	Type   string  `json:"type"`
	Offset *uint64 `json:"offset"`
	Bytes  uint64  `json:"bytes"`
	Code   *int    `json:"code"`
}

// readMessage reads a text frame into m.
func (t *TerminalConn) readMessage(ctx context.Context, m *terminalMessage) error {
	typ, b, err := t.ws.Read(ctx)
	if err != nil {
		return err
	}
	if typ != websocket.MessageText {
		return errors.New("the agent sent output before its attached message")
	}
	return json.Unmarshal(b, m)
}

// Read returns the next event. After the Exit event it returns io.EOF.
// Other errors mean the connection broke, was closed, or ctx ended:
// AttachTerminal with Offset resumes.
func (t *TerminalConn) Read(ctx context.Context) (TerminalEvent, error) {
	for {
		typ, b, err := t.ws.Read(ctx)
		if err != nil {
			if t.exited && websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return TerminalEvent{}, io.EOF
			}
			return TerminalEvent{}, err
		}
		if typ == websocket.MessageBinary {
			t.next += uint64(len(b))
			return TerminalEvent{Output: b}, nil
		}
		var m terminalMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return TerminalEvent{}, fmt.Errorf("a control message from the agent: %w", err)
		}
		switch m.Type {
		case "missed":
			t.next += m.Bytes
			return TerminalEvent{Missed: m.Bytes}, nil
		case "exit":
			if m.Code != nil {
				t.exited = true
				return TerminalEvent{Exit: m.Code}, nil
			}
		}
		// A message this client does not know is skipped.
	}
}

// Offset returns the offset of the next output byte Read will return:
// where AttachTerminal resumes.
func (t *TerminalConn) Offset() uint64 { return t.next }

// Write types p into the terminal, as one frame (at most 1 MiB): the
// agent writes it whole before the input that follows.
func (t *TerminalConn) Write(ctx context.Context, p []byte) error {
	return t.ws.Write(ctx, websocket.MessageBinary, p)
}

// Resize sets the terminal's size, 1 to 1000 columns and rows.
func (t *TerminalConn) Resize(ctx context.Context, cols, rows int) error {
	return t.control(ctx, map[string]any{"type": "resize", "cols": cols, "rows": rows})
}

// Signal sends sig (a name such as "SIGINT", or a number) to the
// terminal's foreground process group, as typing the key would.
func (t *TerminalConn) Signal(ctx context.Context, sig string) error {
	return t.control(ctx, map[string]any{"type": "signal", "signal": sig})
}

func (t *TerminalConn) control(ctx context.Context, v any) error { return writeControl(ctx, t.ws, v) }

// writeControl sends v as a JSON control message, a text frame, as
// /terminal_ws and /exec_ws take them.
func writeControl(ctx context.Context, ws *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, b)
}

// Ping sends a WebSocket ping and waits for the agent's pong: a round
// trip through the agent's reader of this connection. The pong is read by
// Read, so Read must be running in another goroutine meanwhile.
func (t *TerminalConn) Ping(ctx context.Context) error { return t.ws.Ping(ctx) }

// Close closes the connection; the terminal lives on.
func (t *TerminalConn) Close() error {
	return t.ws.Close(websocket.StatusNormalClosure, "")
}
