package server

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

const (
	// wsProtocol is the WebSocket subprotocol of the agent's WebSocket
	// endpoints; the agent selects it, so a client must offer it.
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
// that is not a WebSocket upgrade gets a JSON 400 (returned, for
// writeError); handlers check everything else that decides the status
// (an unknown id is 404) before they call it, since after it only the
// WebSocket can say anything.
func acceptWebSocket(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	if err := checkWebSocket(r); err != nil {
		return nil, err
	}
	// Accept writes its own reply when the handshake is malformed; the
	// error then only needs logging, which writeError does quietly once
	// the status is sent.
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
	if !headerHasToken(r.Header, "Sec-WebSocket-Protocol", wsProtocol) {
		return errorf(http.StatusBadRequest, "offer the WebSocket subprotocol %q", wsProtocol)
	}
	return nil
}
