// Package relay joins two byte streams, as the TCP proxy, the CONNECT and
// WebSocket tunnels and the tunnel client all do, and dials the loopback
// interface the way the agent's forwarders do.
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
)

// Stream is one side of a join: a net.Conn, or anything that reads,
// writes and closes. If it also has CloseWrite (as *net.TCPConn does),
// Join half-closes it when the other side reaches EOF.
type Stream interface {
	io.Reader
	io.Writer
	Close() error
}

// Join copies a to b and b to a, each in a goroutine of its own, until
// both directions have ended, then closes a and b. It returns the bytes
// copied each way and the first copy error (nil if both ended at EOF).
//
// When one side reaches EOF, the other is half-closed with CloseWrite so
// that its peer sees EOF while the other direction goes on: half-closes
// pass through. A side that cannot half-close (a WebSocket) is closed
// instead, which ends the join: its peer has no other way to learn that
// no more is coming. When a copy fails (a reset, or a Close from outside
// the join), both sides are closed at once, since the other copy may be
// waiting on a peer that will never send: both ends close together.
//
// For splice(2) between two sockets, pass the *net.TCPConn values
// themselves, unwrapped: io.Copy reaches TCPConn.ReadFrom only then.
func Join(a, b Stream) (aToB, bToA int64, err error) {
	return JoinCounting(a, b, Counts{})
}

// Counts are where JoinCounting adds the bytes of each direction as they
// pass. A nil counter counts nothing.
type Counts struct {
	AToB, BToA *atomic.Int64
}

// CountChunk is the most bytes a direction of JoinCounting moves before
// they are added to its counter: a long-lived join shows in the counts as
// it goes, and a splice(2) loop between two sockets is broken only once a
// chunk.
const CountChunk = 1 << 20

// JoinCounting is Join, adding the bytes of each direction to counts as
// they pass, a chunk of at most CountChunk at a time. The totals it
// returns are the same as Join's.
func JoinCounting(a, b Stream, counts Counts) (aToB, bToA int64, err error) {
	ab, ba := make(chan copied, 1), make(chan copied, 1) // one slot each, so neither copier can leak
	// closing is set by a copy about to close its side, which cannot
	// half-close: the other copy's read of that side then fails (a
	// WebSocket's NetConn cancels its reads first of all), which is the
	// end of the stream, not a failure.
	var closing atomic.Bool
	go copyHalf(ab, &closing, b, a, counts.AToB)
	go copyHalf(ba, &closing, a, b, counts.BToA)
	var first error
	for range 2 {
		var r copied
		select {
		case r = <-ab:
			aToB = r.n
			ab = nil
		case r = <-ba:
			bToA = r.n
			ba = nil
		}
		if closing.Load() {
			r.err = nil
		}
		if r.err != nil && first == nil {
			first = r.err
			a.Close()
			b.Close()
		}
	}
	a.Close()
	b.Close()
	return aToB, bToA, first
}

// copied is what one copy of a join moved, and how it ended.
type copied struct {
	n   int64
	err error // nil at EOF
}

// copyHalf copies src to dst, then half-closes dst so that its peer sees
// EOF while the other direction goes on; a dst that cannot half-close is
// closed, closing set first. It reports how much it copied on done.
//
// copyHalf runs in its own goroutine, two per join; it ends when src
// reaches EOF or either side fails or is closed. It is a named function
// so goroutine dumps show what each copy is.
func copyHalf(done chan<- copied, closing *atomic.Bool, dst, src Stream, count *atomic.Int64) {
	n, err := copyCounting(dst, src, count)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite() // a peer already gone shows in the other copy
		} else {
			closing.Store(true)
			dst.Close()
		}
	}
	done <- copied{n, err}
}

// copyBufferSize is the buffer of a copy that cannot splice: each read
// from a WebSocket, and each message written to one, is up to this big.
const copyBufferSize = 128 << 10

// copyCounting copies src to dst, adding to count (if not nil) a chunk of
// at most CountChunk at a time. Between two sockets it uses io.Copy, which
// splices (through the chunk's io.LimitedReader too: TCPConn.ReadFrom
// unwraps it); else it copies through a buffer of copyBufferSize.
func copyCounting(dst, src Stream, count *atomic.Int64) (int64, error) {
	_, tcpDst := dst.(*net.TCPConn)
	_, tcpSrc := src.(*net.TCPConn)
	var buf []byte
	if !tcpDst || !tcpSrc {
		buf = make([]byte, copyBufferSize)
	}
	if count == nil {
		return copyStream(dst, src, buf)
	}
	chunk := &io.LimitedReader{R: src}
	var total int64
	for {
		chunk.N = CountChunk
		n, err := copyStream(dst, chunk, buf)
		total += n
		count.Add(n)
		if err != nil || n < CountChunk { // a nil error short of a chunk is src's EOF
			return total, err
		}
	}
}

// copyStream copies src to dst with io.Copy if buf is nil, else through
// buf. Hidden behind plain Reader and Writer, a TCP side cannot make
// io.CopyBuffer use its ReadFrom or WriteTo, which take 32 KiB at a time.
func copyStream(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	if buf == nil {
		return io.Copy(dst, src)
	}
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}

// DialLoopback connects to port on 127.0.0.1 and, if that is refused, on
// [::1], for services that listen on IPv6 only. Both errors are in the
// one it returns; errors.Is(err, syscall.ECONNREFUSED) tells that nothing
// listens on either.
func DialLoopback(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer // ctx carries the timeout
	p := strconv.Itoa(port)
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", p))
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return c, err
	}
	c, err6 := d.DialContext(ctx, "tcp", net.JoinHostPort("::1", p))
	if err6 != nil {
		if errors.Is(err6, syscall.EADDRNOTAVAIL) || errors.Is(err6, syscall.EAFNOSUPPORT) {
			return nil, err // no IPv6 here: the IPv4 refusal is the answer
		}
		return nil, fmt.Errorf("%w; %w", err, err6)
	}
	return c, nil
}
