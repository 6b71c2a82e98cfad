package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/terminals"
)

const (
	// wsOutputFrame is the most output one binary frame carries, and so
	// what a connection's handler holds of it.
	wsOutputFrame = 32 << 10
	// wsMaxMessage caps a frame from the client: a paste of up to 1 MiB
	// is one frame; a larger frame closes the connection (1009).
	wsMaxMessage = 1 << 20
)

// handleTerminalWS serves GET /terminal_ws?id=ID[&since=OFFSET]: it
// upgrades to a WebSocket that carries the terminal's output from offset
// since (by default the oldest byte kept) as binary frames, and the
// client's input the other way, with JSON control messages in text
// frames. Everything that decides the status (a missing or unknown id, a
// since past the end of the output) is checked before the upgrade.
func (s *Server) handleTerminalWS(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id := q.Get("id")
	if id == "" {
		return errorf(http.StatusBadRequest, "id is required")
	}
	since := uint64(terminals.FromOldest)
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return errorf(http.StatusBadRequest, "since must be a byte offset (a non-negative integer)")
		}
		since = n
	}
	t, err := s.terms.Get(id)
	if err != nil {
		return err
	}
	cur, err := t.Attach(since)
	if err != nil {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	defer cur.Close()
	conn, err := acceptWebSocket(w, r)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(wsMaxMessage)
	s.serveTerminal(r.Context(), conn, t, cur)
	return nil
}

// Server→client control messages (text frames).
type (
	wsAttached struct {
		Type   string `json:"type"` // "attached"
		Offset uint64 `json:"offset"`
	}
	wsMissed struct {
		Type  string `json:"type"` // "missed"
		Bytes uint64 `json:"bytes"`
	}
	wsExit struct {
		Type string `json:"type"` // "exit"
		Code int    `json:"code"`
	}
)

// serveTerminal runs one terminal connection until the terminal ends
// (exit, then a normal close), the client leaves or stops answering
// pings, the client breaks the protocol (a close saying why), or the
// agent shuts down (ctx ends: a going-away close).
//
// STYLE rule 16 asks for one reader goroutine and the handler's loop
// writing output and pings. Pings get a goroutine of their own here:
// coder/websocket's Ping waits for the pong, and in the output loop that
// wait would hold back output for a round trip at every ping. All three
// end with connCtx, which the loop cancels on its way out, and are waited
// for before it returns.
func (s *Server) serveTerminal(ctx context.Context, conn *websocket.Conn, t *terminals.Terminal, cur *terminals.Cursor) {
	// The connection's own context: the agent's shutdown (ctx) must not
	// cancel reads, which would close the connection at once, before the
	// going-away close could be sent.
	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	inputDone := make(chan error, 1) // one slot: the reader never blocks on it
	wg.Add(2)
	go terminalInput(connCtx, &wg, conn, t, inputDone)
	go pingClient(connCtx, &wg, conn, s.cfg.KeepAlive, s.cfg.StallTimeout, cancel)

	// attached is where the client asked to start, even if the ring has
	// evicted bytes from there on: the first Read reports those as
	// missed. So every byte from attached on is counted once, as missed
	// or as output, and the client's attached + missed + bytes received
	// is always the offset to resume at.
	if sendJSON(connCtx, conn, wsAttached{"attached", cur.Offset()}) != nil {
		return
	}
	buf := make([]byte, wsOutputFrame)
	for {
		n, missed, ended := cur.Read(buf)
		if missed > 0 && sendJSON(connCtx, conn, wsMissed{"missed", missed}) != nil {
			return
		}
		if n > 0 && conn.Write(connCtx, websocket.MessageBinary, buf[:n]) != nil {
			return // the client left or was dropped
		}
		if n == len(buf) {
			continue
		}
		if ended {
			if sendJSON(connCtx, conn, wsExit{"exit", t.ExitCode()}) == nil {
				_ = conn.Close(websocket.StatusNormalClosure, "terminal exited")
			}
			return
		}
		select {
		case <-cur.Wake():
		case err := <-inputDone:
			var pe *wsProtocolError
			if errors.As(err, &pe) {
				_ = conn.Close(websocket.StatusPolicyViolation, pe.reason())
			}
			return // else the client closed, or the connection failed
		case <-connCtx.Done():
			return // dropped: it answered no ping in time
		case <-ctx.Done():
			_ = conn.Close(websocket.StatusGoingAway, "agent shutting down")
			return
		}
	}
}

// sendJSON writes v as a text frame.
func sendJSON(ctx context.Context, conn *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, b)
}

// wsProtocolError is a client frame the protocol does not allow; the
// connection is closed with 1008 and its message as the reason.
type wsProtocolError struct{ msg string }

func (e *wsProtocolError) Error() string { return e.msg }

// reason returns the message cut to the 123 bytes a close reason may
// hold.
func (e *wsProtocolError) reason() string {
	if len(e.msg) > 123 {
		return e.msg[:120] + "..."
	}
	return e.msg
}

func protocolErrorf(format string, args ...any) error {
	return &wsProtocolError{fmt.Sprintf(format, args...)}
}

// terminalInput reads the client's frames in order: a binary frame is
// typed into t, whole, before the next frame is read; a text frame is a
// control message. Input to a terminal that has ended is dropped (the
// output loop is about to say exit).
//
// terminalInput is the connection's only reader. It runs in its own
// goroutine; it ends when the connection closes or fails, when ctx ends,
// or at a frame the protocol does not allow, and sends why on done.
func terminalInput(ctx context.Context, wg *sync.WaitGroup, conn *websocket.Conn, t *terminals.Terminal, done chan<- error) {
	defer wg.Done()
	for {
		typ, data, err := conn.Read(ctx)
		if err == nil {
			if typ == websocket.MessageBinary {
				_, err = t.Write(ctx, data)
			} else {
				err = applyControl(terminalTarget{t}, data, "send input as binary frames")
			}
			if errors.Is(err, terminals.ErrNotRunning) {
				err = nil
			}
		}
		if err != nil {
			done <- err
			return
		}
	}
}

// terminalTarget is a terminal as control messages act on it.
type terminalTarget struct{ t *terminals.Terminal }

func (c terminalTarget) resize(cols, rows uint16) error  { return c.t.Resize(cols, rows) }
func (c terminalTarget) signal(sig syscall.Signal) error { return c.t.Signal(sig) }

// pingClient pings the client every interval and calls drop if a ping is
// not answered within timeout: a client that stops answering is dropped.
//
// pingClient runs in its own goroutine, one per connection; it ends when
// ctx ends or a ping fails.
func pingClient(ctx context.Context, wg *sync.WaitGroup, conn *websocket.Conn, interval, timeout time.Duration, drop context.CancelFunc) {
	defer wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			drop()
			return
		}
	}
}
