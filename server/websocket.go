package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
)

const (
	// wsProtocol is the WebSocket subprotocol of the agent's WebSocket
	// endpoints. The agent selects it when a client offers it; a client
	// that offers no subprotocol at all (and so authenticates with the
	// Authorization header) is served the same protocol with none
	// selected. A client that offers others but not this one is refused:
	// it asked for a protocol the agent does not speak.
	wsProtocol = "sandbox-executor"
	// wsTokenPrefix starts the subprotocol that carries the bearer token
	// for clients that cannot set an Authorization header on a WebSocket
	// (browsers): "bearer." + base64url(token), offered beside wsProtocol.
	// The agent never selects it, so the token is not echoed back.
	wsTokenPrefix = "bearer."
)

// isWebSocketUpgrade reports whether r asks to be upgraded to a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

// headerHasToken reports whether one of the comma-separated values of
// header name is token, compared case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// wsToken returns the bearer token a WebSocket upgrade carries as a
// "bearer.<base64url(token)>" subprotocol, padded or not. The token is
// never taken from the query string, where it would end in access logs
// and browser history.
func wsToken(r *http.Request) (string, bool) {
	if !isWebSocketUpgrade(r) {
		return "", false
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), wsTokenPrefix)
			if !ok {
				continue
			}
			b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
			if err == nil && len(b) > 0 {
				return string(b), true
			}
		}
	}
	return "", false
}

// acceptWebSocket upgrades r to a WebSocket speaking wsProtocol. A request
// that is not a WebSocket upgrade, or that offers subprotocols but not
// wsProtocol, gets a 400 (returned, for writeError); handlers check
// everything else that decides the status (an unknown id is 404) before
// they call it, since after it only the WebSocket can say anything.
func acceptWebSocket(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	if err := checkWebSocket(r); err != nil {
		return nil, err
	}
	// Accept writes its own reply when the handshake is malformed; the
	// error then only needs logging, which writeError does quietly once
	// the status is sent. It selects wsProtocol if offered, else none.
	//
	// Pages of any origin may connect (a browser page served elsewhere,
	// such as examples/terminal.html): the origin check guards against a
	// foreign page riding on the user's cookies, and the agent takes no
	// cookie, only a token that the page itself must hold.
	return websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsProtocol}, InsecureSkipVerify: true})
}

// checkWebSocket returns the 400 that acceptWebSocket would answer r with
// for not being an upgrade to wsProtocol, or nil; for a handler that must
// know before it does anything the upgrade will need (dial a tunnel).
func checkWebSocket(r *http.Request) error {
	if !isWebSocketUpgrade(r) {
		return errorf(http.StatusBadRequest, "%s needs a WebSocket upgrade (subprotocol %q)", r.URL.Path, wsProtocol)
	}
	if len(r.Header.Values("Sec-WebSocket-Protocol")) > 0 && !headerHasToken(r.Header, "Sec-WebSocket-Protocol", wsProtocol) {
		return &upgradeRefusal{
			httpError: &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf("offer the WebSocket subprotocol %q, "+
				"or no subprotocol and the Authorization header; a browser offers its token, %s<base64url(token)>, beside %q",
				wsProtocol, wsTokenPrefix, wsProtocol)},
			reason: fmt.Sprintf("WebSocket subprotocol %q required", wsProtocol),
		}
	}
	return nil
}

// upgradeRefusal is a WebSocket upgrade refused for what it offered. Many
// WebSocket clients show only the status line of a failed handshake
// (wscat, browsers' consoles say even less), so writeError answers it as
// any error, with the JSON body, but with reason as the status line's
// reason phrase instead of "Bad Request".
type upgradeRefusal struct {
	*httpError
	reason string // visible ASCII and spaces
}

func (e *upgradeRefusal) Unwrap() error { return e.httpError }

// writeWithReason writes the reply to r code with reason as its reason phrase
// and body as JSON, on the connection taken over from net/http, which has
// no other way to set a reason phrase; then closes it. It reports whether
// it did: false, having written nothing, if the connection cannot be taken
// over (HTTP/2), and the caller then writes the reply as usual.
func writeWithReason(w http.ResponseWriter, r *http.Request, code int, reason string, body any) bool {
	b, err := json.Marshal(body)
	if err != nil {
		return false
	}
	h := w.Header().Clone() // the request id, and whatever else the middleware set
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	hijacked(r, code)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	fmt.Fprintf(brw, "HTTP/1.1 %03d %s\r\n", code, reason)
	_ = h.Write(brw)
	_, _ = brw.WriteString("\r\n")
	_, _ = brw.Write(append(b, '\n'))
	_ = conn.SetWriteDeadline(time.Now().Add(connlimit.LingerTimeout)) // a client that reads nothing must not hold the handler
	_ = brw.Flush()                                                    // an error means the client left
	return true
}

// controlTarget is what a WebSocket's JSON control messages act on: a
// terminal, or a command of /exec_ws.
type controlTarget interface {
	resize(cols, rows uint16) error
	signal(sig syscall.Signal) error
}

// applyControl applies one control message, resize or signal, to c.
// input says how the stream's input is sent, for the error about a text
// frame that is not a control message.
func applyControl(c controlTarget, data []byte, input string) error {
	var m struct {
		Type   string         `json:"type"`
		Cols   *int           `json:"cols"`
		Rows   *int           `json:"rows"`
		Signal stringOrNumber `json:"signal"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return protocolErrorf("text frames are JSON control messages; %s", input)
	}
	switch m.Type {
	case "resize":
		if m.Cols == nil || m.Rows == nil {
			return protocolErrorf("resize needs cols and rows")
		}
		cols, err := terminalSize("cols", m.Cols, 0)
		if err != nil {
			return protocolErrorf("%s", err.Error())
		}
		rows, err := terminalSize("rows", m.Rows, 0)
		if err != nil {
			return protocolErrorf("%s", err.Error())
		}
		return c.resize(cols, rows)
	case "signal":
		if m.Signal == "" {
			return protocolErrorf("signal needs a signal, such as \"SIGINT\"")
		}
		sig, err := procs.ParseSignal(string(m.Signal))
		if err != nil {
			return protocolErrorf("%s", err.Error())
		}
		return c.signal(sig)
	}
	return protocolErrorf("unknown control message type %q", m.Type)
}
