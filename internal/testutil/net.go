package testutil

import (
	"bytes"
	"net"
	"sync"
	"syscall"
	"testing"
)

// Serve listens on a loopback port and runs handle for each connection in
// a goroutine of its own, until the test ends. handle need not close its
// connection. At the end the listener and every live connection are
// closed, and Serve's goroutines are waited for, so a handler must return
// once its connection is closed.
func Serve(tb testing.TB, handle func(net.Conn)) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards conns
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() { // the accept loop; it ends when ln is closed
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() { // one per connection; it ends when handle returns
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln
}

// SyncBuffer is a bytes.Buffer that goroutines may write while a test
// reads it, such as a logger's output.
type SyncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ClosedPort returns a loopback port on which a connection is refused, and
// stays refused until the test ends: the port is bound, so that no other
// test can listen on it, but not listening.
func ClosedPort(tb testing.TB) int {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}
