package wsclient

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replyServer answers one request on 127.0.0.1 with what reply returns
// for it, then closes the connection (if reply returns nothing, it waits
// for the client to leave), and returns the address and the request it
// read.
func replyServer(t *testing.T, reply func(key string) string) (string, <-chan *http.Request) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	reqs := make(chan *http.Request, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer nc.Close()
		req, err := http.ReadRequest(bufio.NewReader(nc))
		if err != nil {
			return
		}
		reqs <- req
		if r := reply(req.Header.Get("Sec-WebSocket-Key")); r != "" {
			_, _ = io.WriteString(nc, r)
			return
		}
		_, _ = io.Copy(io.Discard, nc)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), reqs
}

func accept(key string) string {
	sum := sha1.Sum([]byte(key + acceptGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func handshakeWith(t *testing.T, ctx context.Context, addr string, req Request) (*Conn, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	c, err := Handshake(ctx, nc, req)
	if err != nil {
		nc.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// The request is an upgrade with a fresh 16-byte key, version 13, the
// subprotocol and the caller's headers, and no extension.
func TestHandshakeRequest(t *testing.T) {
	addr, reqs := replyServer(t, func(key string) string {
		return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n" +
			"Sec-WebSocket-Protocol: p\r\nSec-WebSocket-Accept: " + accept(key) + "\r\n\r\n"
	})
	_, err := handshakeWith(t, t.Context(), addr, Request{Host: "agent:8080", Path: "/base/tunnel_ws?port=22",
		Subprotocol: "p", Header: http.Header{"Authorization": {"Bearer t"}}})
	require.NoError(t, err)
	r := <-reqs
	assert.Equal(t, "GET", r.Method)
	assert.Equal(t, "/base/tunnel_ws?port=22", r.RequestURI)
	assert.Equal(t, "agent:8080", r.Host)
	assert.Equal(t, "websocket", r.Header.Get("Upgrade"))
	assert.Equal(t, "Upgrade", r.Header.Get("Connection"))
	assert.Equal(t, "13", r.Header.Get("Sec-WebSocket-Version"))
	assert.Equal(t, "p", r.Header.Get("Sec-WebSocket-Protocol"))
	assert.Equal(t, "Bearer t", r.Header.Get("Authorization"))
	assert.Empty(t, r.Header.Values("Sec-WebSocket-Extensions"))
	key, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key"))
	require.NoError(t, err)
	assert.Len(t, key, 16)
}

// A reply that does not open the WebSocket the client asked for fails
// the handshake; a refusal is an *UpgradeError with its body.
func TestHandshakeRefused(t *testing.T) {
	const ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	for name, tc := range map[string]struct {
		reply func(key string) string
		want  string
	}{
		"a refusal": {func(string) string {
			return "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"error\":\"no\"}\n"
		}, "did not upgrade to a WebSocket: 502 Bad Gateway"},
		"a wrong accept": {func(key string) string {
			return ok + "Sec-WebSocket-Protocol: p\r\nSec-WebSocket-Accept: " + accept(key+"x") + "\r\n\r\n"
		}, "does not answer the key"},
		"no subprotocol": {func(key string) string {
			return ok + "Sec-WebSocket-Accept: " + accept(key) + "\r\n\r\n"
		}, `subprotocol "", not "p"`},
		"an extension": {func(key string) string {
			return ok + "Sec-WebSocket-Protocol: p\r\nSec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Accept: " + accept(key) + "\r\n\r\n"
		}, "was not offered"},
		"no upgrade": {func(key string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Protocol: p\r\nSec-WebSocket-Accept: " + accept(key) + "\r\n\r\n"
		}, "not an upgrade to a WebSocket"},
		"not HTTP": {func(string) string { return "SSH-2.0-OpenSSH\r\n" }, "reading the WebSocket upgrade's reply"},
	} {
		addr, _ := replyServer(t, tc.reply)
		_, err := handshakeWith(t, t.Context(), addr, Request{Host: "h", Path: "/", Subprotocol: "p"})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
		if name == "a refusal" {
			var ue *UpgradeError
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, http.StatusBadGateway, ue.StatusCode)
			assert.Equal(t, "{\"error\":\"no\"}\n", string(ue.Body))
		}
	}
}

// ctx bounds the handshake: a server that never answers fails it with
// ctx's error.
func TestHandshakeContext(t *testing.T) {
	addr, _ := replyServer(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := handshakeWith(t, ctx, addr, Request{Host: "h", Path: "/"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	addr, _ = replyServer(t, func(string) string { return "" })
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = handshakeWith(t, ctx, addr, Request{Host: "h", Path: "/"})
	assert.ErrorIs(t, err, context.Canceled)
}

// A line break in the request's parts would smuggle a header in: refused
// before anything is sent.
func TestHandshakeRefusesLineBreaks(t *testing.T) {
	for _, req := range []Request{
		{Host: "h", Path: "/ HTTP/1.1\r\nX: y"},
		{Host: "h\r\nX: y", Path: "/"},
		{Host: "h", Path: "/", Header: http.Header{"Authorization": {"Bearer t\r\nX: y"}}},
		{Host: "h", Path: "/", Subprotocol: "p\nX: y"},
	} {
		_, err := Handshake(t.Context(), nil, req)
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), "line break"), err.Error())
	}
}
