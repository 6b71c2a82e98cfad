package wsclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// acceptGUID is appended to the key for Sec-WebSocket-Accept (RFC 6455
// section 4.2.2).
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// maxErrorBody is how much of a refusal's body UpgradeError keeps.
const maxErrorBody = 64 << 10

// Request is what Handshake asks the server for.
type Request struct {
	Host string // the Host header, as "example.com:8080"
	// Path is the escaped path and query, as "/base/tunnel_ws?port=22".
	Path string
	// Header holds further headers, as Authorization; nil for none. The
	// WebSocket's own are set by Handshake.
	Header http.Header
	// Subprotocol is offered, and the server must select it; empty
	// offers none, and the server must select none.
	Subprotocol string
}

// UpgradeError is Handshake's error when the server answered with
// something other than 101 Switching Protocols.
type UpgradeError struct {
	StatusCode int    // as 502
	Status     string // as "502 Bad Gateway"
	Body       []byte // the body's first maxErrorBody bytes
}

func (e *UpgradeError) Error() string {
	return "the server did not upgrade to a WebSocket: " + e.Status
}

// Handshake opens a WebSocket on nc, a connection to the server (over TLS
// for wss): it sends req as an upgrade and checks the reply. ctx bounds
// the handshake only: if it ends first, Handshake returns ctx's error. On
// success the Conn owns nc; on error nc is the caller's to close.
func Handshake(ctx context.Context, nc net.Conn, req Request) (*Conn, error) {
	var random [16 + 32]byte // the key, then the mask keys' seed
	if _, err := rand.Read(random[:]); err != nil {
		return nil, err
	}
	key := base64.StdEncoding.EncodeToString(random[:16])
	text, err := requestText(req, key)
	if err != nil {
		return nil, err
	}
	// Not a deadline at ctx's: a read that failed at it might be seen
	// before ctx's error is set. ctx's end unblocks what is pending.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	br, err := exchange(nc, text, key, req.Subprotocol)
	if !stop() || err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return newConn(nc, br, [32]byte(random[16:])), nil
}

// requestText returns the upgrade request for req with key.
func requestText(req Request, key string) (string, error) {
	var b strings.Builder
	b.WriteString("GET " + req.Path + " HTTP/1.1\r\nHost: " + req.Host +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n")
	if req.Subprotocol != "" {
		b.WriteString("Sec-WebSocket-Protocol: " + req.Subprotocol + "\r\n")
	}
	for name, values := range req.Header {
		for _, v := range values {
			b.WriteString(name + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	// A CR or LF would end a line early: what follows would be a header
	// (or a request) of its own.
	for _, s := range []string{req.Host, req.Path, req.Subprotocol} {
		if strings.ContainsAny(s, "\r\n ") {
			return "", fmt.Errorf("websocket: %q has a space or line break", s)
		}
	}
	for name, values := range req.Header {
		for _, v := range values {
			if strings.ContainsAny(name, "\r\n: ") || strings.ContainsAny(v, "\r\n") {
				return "", fmt.Errorf("websocket: header %q has a line break", name)
			}
		}
	}
	return b.String(), nil
}

// exchange sends the request text and reads the reply, which must accept
// key and select subprotocol (or none if it is empty). It returns the
// reader that holds whatever came after the reply.
func exchange(nc net.Conn, text, key, subprotocol string) (*bufio.Reader, error) {
	if _, err := io.WriteString(nc, text); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(nc, readBufferSize)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return nil, fmt.Errorf("reading the WebSocket upgrade's reply: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, &UpgradeError{StatusCode: resp.StatusCode, Status: resp.Status, Body: body}
	}
	sum := sha1.Sum([]byte(key + acceptGUID))
	switch {
	case !hasToken(resp.Header, "Upgrade", "websocket"), !hasToken(resp.Header, "Connection", "upgrade"):
		return nil, fmt.Errorf("the server's 101 is not an upgrade to a WebSocket")
	case resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]):
		return nil, fmt.Errorf("the server's Sec-WebSocket-Accept %q does not answer the key", resp.Header.Get("Sec-WebSocket-Accept"))
	case resp.Header.Get("Sec-WebSocket-Extensions") != "":
		return nil, fmt.Errorf("the server chose the WebSocket extension %q, which was not offered", resp.Header.Get("Sec-WebSocket-Extensions"))
	case resp.Header.Get("Sec-WebSocket-Protocol") != subprotocol:
		return nil, fmt.Errorf("the server chose the WebSocket subprotocol %q, not %q", resp.Header.Get("Sec-WebSocket-Protocol"), subprotocol)
	}
	return br, nil
}

// hasToken reports whether one of the comma-separated values of header
// name is token, compared case-insensitively.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
