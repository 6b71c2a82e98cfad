package wsclient

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testProtocol = "sandbox-executor"

// dialTest opens a WebSocket to addr with Handshake; the test closes it
// at its end.
func dialTest(t *testing.T, addr string) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	c, err := Handshake(t.Context(), nc, Request{Host: addr, Path: "/ws", Subprotocol: testProtocol})
	if err != nil {
		nc.Close()
	}
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// coderServer serves WebSockets accepted by coder/websocket (the agent's
// library) on 127.0.0.1 until the test ends, each handed to serve, and
// returns its address. The test waits for every serve to return.
func coderServer(t *testing.T, serve func(ctx context.Context, c *websocket.Conn)) string {
	t.Helper()
	var wg sync.WaitGroup
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{testProtocol}})
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer c.CloseNow()
		c.SetReadLimit(-1)
		serve(r.Context(), c)
	}))
	t.Cleanup(func() { ts.Close(); wg.Wait() })
	return ts.Listener.Addr().String()
}

// rawPeer is the server end of a WebSocket whose frames a test writes and
// reads by hand.
type rawPeer struct {
	c  net.Conn
	br *bufio.Reader
}

// rawFrame is a frame the client sent, unmasked.
type rawFrame struct {
	fin     bool
	op      byte
	masked  bool
	key     uint32
	payload []byte
}

// rawServer accepts one WebSocket on 127.0.0.1, answering the handshake
// by hand, and runs serve with it in a goroutine; it returns the client's
// Conn. The test waits for serve to return, after closing the client.
func rawServer(t *testing.T, serve func(p *rawPeer)) *Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer nc.Close()
		p := &rawPeer{c: nc, br: bufio.NewReader(nc)}
		req, err := http.ReadRequest(p.br)
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + acceptGUID))
		_, _ = io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Protocol: "+testProtocol+"\r\nSec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
		serve(p)
	}()
	c := dialTest(t, ln.Addr().String())
	t.Cleanup(func() { c.Close(); <-done })
	return c
}

// frame returns a server frame: unmasked, final if fin.
func frame(fin bool, op byte, payload []byte) []byte {
	b := []byte{op, 0}
	if fin {
		b[0] |= 0x80
	}
	switch n := len(payload); {
	case n <= 125:
		b[1] = byte(n)
	case n <= 0xFFFF:
		b[1] = 126
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b[1] = 127
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

// closePayload returns a close frame's payload: code, then reason.
func closePayload(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

func (p *rawPeer) write(frames ...[]byte) error {
	var b []byte
	for _, f := range frames {
		b = append(b, f...)
	}
	_, err := p.c.Write(b)
	return err
}

// readFrame reads one frame the client sent and unmasks it.
func (p *rawPeer) readFrame() (rawFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		return rawFrame{}, err
	}
	f := rawFrame{fin: h[0]&0x80 != 0, op: h[0] & 0x0F, masked: h[1]&0x80 != 0}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(p.br, l[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(p.br, l[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	var k [4]byte
	if f.masked {
		if _, err := io.ReadFull(p.br, k[:]); err != nil {
			return f, err
		}
		f.key = binary.BigEndian.Uint32(k[:])
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(p.br, f.payload); err != nil {
		return f, err
	}
	for i := range f.payload {
		f.payload[i] ^= k[i%4]
	}
	return f, nil
}

// readUntil reads frames until one of opcode op, and returns it; data
// frames before it are dropped.
func (p *rawPeer) readUntil(op byte) (rawFrame, error) {
	for {
		f, err := p.readFrame()
		if err != nil || f.op == op {
			return f, err
		}
	}
}
