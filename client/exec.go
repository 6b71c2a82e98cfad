package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// ExecOptions say what Exec runs. Exactly one of Cmd and Argv, except
// with TTY, where neither runs the login shell.
type ExecOptions struct {
	// Cmd runs as sh -c Cmd.
	Cmd string
	// Argv runs its first word with exactly the others as arguments, no
	// shell (in a session, through the session's shell, each word quoted).
	Argv    []string
	Cwd     string            // working directory; empty means the agent's (or the session's)
	Env     map[string]string // laid over the agent's (or the session's) environment
	Session string            // run in this session
	User    string            // run as this user (a name or a uid)
	// Timeout, if positive, kills the command's process group when it
	// passes; it then ends with code 124.
	Timeout time.Duration
	// TTY runs the command on a pseudo-terminal of Cols×Rows (zero: 80×24):
	// its output, stderr included, comes as Stdout.
	TTY        bool
	Cols, Rows int
	// Stdin makes WriteStdin the command's stdin; without it stdin is
	// /dev/null and what WriteStdin sends is dropped. A TTY always takes
	// input.
	Stdin bool
	// StdinRaw, with Stdin and without TTY, asks the agent for a stdin
	// side channel: if it offers one (StdinID), SendStdin streams stdin
	// there, spliced by the agent. An agent without it ignores the ask.
	StdinRaw bool
}

// ExecConn is a command running over /exec_ws: Read returns its output,
// byte for byte, and then how it ended. Read must be called by one
// goroutine at a time (it also answers the agent's pings, so keep calling
// it); the other methods may be called concurrently with it. Close it when
// done: closing before the exit kills the command.
type ExecConn struct {
	ws      *websocket.Conn
	pid     int
	exited  bool
	buf     []byte     // the last output frame: ExecEvent.Data points into it
	frame   []byte     // WriteStdin's frame, reused
	bc      *batchConn // the connection under ws, which gathers large stdin frames; see batchMin
	c       *Client    // for SendStdin
	stdinID string     // the stdin side channel's id; "" if none
}

// ExecEvent is one thing an ExecConn read: output, or the exit.
type ExecEvent struct {
	Stream Stream // Stdout or Stderr, with Data
	// Data is raw bytes, as the command wrote them. It is only valid
	// until the next Read, which reuses its memory.
	Data []byte
	// Exit is set on the last event, once every output byte has been read.
	Exit *ExecExit
}

// ExecExit is how an Exec command ended.
type ExecExit struct {
	Code        int // as Run reports it: 128+n after signal n, 124 after Timeout
	Termination Termination
}

// Termination says why a command ended: Reason "exit", "signal" (a
// signal the agent did not send; Signal names it), "killed" (a Signal
// call, or kill_process), "timeout", "client_gone" (the request that owned
// it left), or the limit that fired ("cpu_limit", "file_size_limit",
// "memory_limit", "pids_limit").
type Termination struct {
	Reason string `json:"reason"`
	Signal string `json:"signal,omitempty"`
}

// Exec starts a command over /exec_ws and returns once the agent has
// started it. A request the agent refuses is an *Error with the status
// /run would have given (400 for a bad cwd, 404 for an unknown session);
// ctx bounds the connecting and starting only.
func (c *Client) Exec(ctx context.Context, opts ExecOptions) (*ExecConn, error) {
	var bc *batchConn
	dial := &websocket.DialOptions{HTTPClient: batchingClient(c.hc, &bc), Subprotocols: []string{"sandbox-executor"}}
	if c.token != "" {
		dial.HTTPHeader = http.Header{"Authorization": {"Bearer " + c.token}}
	}
	ws, resp, err := websocket.Dial(ctx, c.base+"/exec_ws", dial)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, readError(resp)
		}
		return nil, &ConnError{URL: c.base, Err: err}
	}
	ws.SetReadLimit(1 << 20) // the agent's output frames are under 1 MiB
	x := &ExecConn{ws: ws, bc: bc, c: c}
	if err := x.start(ctx, opts); err != nil {
		ws.CloseNow()
		return nil, err
	}
	return x, nil
}

// execMessage is a control message from the agent.
type execMessage struct {
	Type        string      `json:"type"`
	PID         int         `json:"pid"`
	Code        int         `json:"code"`
	Termination Termination `json:"termination"`
	Error       string      `json:"error"`
	Status      int         `json:"status"`
	StdinID     string      `json:"stdin_id"`
}

// start sends the request and reads the agent's answer: started or error.
func (x *ExecConn) start(ctx context.Context, o ExecOptions) error {
	req := struct {
		Cmd     string            `json:"cmd,omitempty"`
		Argv    []string          `json:"argv,omitempty"`
		Cwd     string            `json:"cwd,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		Session string            `json:"session,omitempty"`
		User    string            `json:"user,omitempty"`
		Timeout float64           `json:"timeout,omitempty"`
		TTY     bool              `json:"tty,omitempty"`
		Cols    int               `json:"cols,omitempty"`
		Rows    int               `json:"rows,omitempty"`
		Stdin   bool              `json:"stdin,omitempty"`
		Raw     bool              `json:"stdin_raw,omitempty"`
	}{o.Cmd, o.Argv, o.Cwd, o.Env, o.Session, o.User, o.Timeout.Seconds(), o.TTY, o.Cols, o.Rows, o.Stdin, o.StdinRaw}
	if err := x.control(ctx, req); err != nil {
		return err
	}
	typ, b, err := x.ws.Read(ctx)
	if err != nil {
		return err
	}
	var m execMessage
	if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil {
		return errors.New("exec: the agent's first message is not a control message")
	}
	switch m.Type {
	case "started":
		x.pid, x.stdinID = m.PID, m.StdinID
		return nil
	case "error":
		return &Error{StatusCode: m.Status, Message: m.Error}
	}
	return fmt.Errorf("exec: the agent's first message is %q, not started", m.Type)
}

// PID returns the command's process id, which is also its process group's.
func (x *ExecConn) PID() int { return x.pid }

// Read returns the next output or the exit. After the exit it returns
// io.EOF. Other errors mean the connection broke or ctx ended; the
// command is then killed.
func (x *ExecConn) Read(ctx context.Context) (ExecEvent, error) {
	for {
		typ, r, err := x.ws.Reader(ctx)
		if err == nil {
			x.buf, err = readMessage(r, x.buf[:0])
		}
		if err != nil {
			if x.exited {
				return ExecEvent{}, io.EOF
			}
			return ExecEvent{}, err
		}
		b := x.buf
		if typ == websocket.MessageBinary {
			if len(b) == 0 || (b[0] != 1 && b[0] != 2) {
				continue // a channel this client does not know
			}
			return ExecEvent{Stream: Stream(b[0]), Data: b[1:]}, nil
		}
		var m execMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return ExecEvent{}, fmt.Errorf("a control message from the agent: %w", err)
		}
		if m.Type == "exit" {
			x.exited = true
			return ExecEvent{Exit: &ExecExit{Code: m.Code, Termination: m.Termination}}, nil
		}
		// A message this client does not know is skipped.
	}
}

// readMessage appends what r holds to buf, growing it as needed (the
// connection's read limit bounds it), and returns it.
func readMessage(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, max(64<<10, cap(buf)))...)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// WriteStdin sends p to the command's stdin as one frame (at most 1 MiB
// less a byte); the agent writes it whole before what follows, so this
// waits, through the connection, for the command to read. Calls must not
// overlap.
func (x *ExecConn) WriteStdin(ctx context.Context, p []byte) error {
	x.frame = append(append(x.frame[:0], 0), p...)
	if x.bc == nil || len(x.frame) < batchMin {
		return x.ws.Write(ctx, websocket.MessageBinary, x.frame)
	}
	x.bc.begin()
	err := x.ws.Write(ctx, websocket.MessageBinary, x.frame)
	if ferr := x.bc.flush(ctx, func() { x.ws.CloseNow() }); err == nil {
		err = ferr
	}
	return err
}

// CloseStdin closes the command's stdin after what was written: it reads
// EOF (on a TTY, Ctrl-D is typed).
func (x *ExecConn) CloseStdin(ctx context.Context) error {
	return x.ws.Write(ctx, websocket.MessageBinary, []byte{255, 0})
}

// Resize sets a TTY's size, 1 to 1000 columns and rows.
func (x *ExecConn) Resize(ctx context.Context, cols, rows int) error {
	return x.control(ctx, map[string]any{"type": "resize", "cols": cols, "rows": rows})
}

// Signal sends sig (a name such as "SIGINT", or a number) to the
// command's process group (on a TTY, its foreground job).
func (x *ExecConn) Signal(ctx context.Context, sig string) error {
	return x.control(ctx, map[string]any{"type": "signal", "signal": sig})
}

func (x *ExecConn) control(ctx context.Context, v any) error { return writeControl(ctx, x.ws, v) }

// Close closes the connection; a command still running is killed.
func (x *ExecConn) Close() error {
	if x.exited {
		return x.ws.Close(websocket.StatusNormalClosure, "")
	}
	return x.ws.CloseNow()
}
