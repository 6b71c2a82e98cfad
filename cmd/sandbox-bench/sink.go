package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
)

// The first byte a client sends to the sink server picks the mode.
const (
	modeSink = 'S' // read to EOF, then reply with the count as 8 bytes big-endian
	modeEcho = 'E' // write back everything read, half-close at EOF
	// modeCount reads an 8-byte big-endian length n, then n bytes, then
	// replies with the count as 8 bytes: a bulk transfer that needs no
	// half-close, which a WebSocket tunnel cannot pass.
	modeCount = 'C'
	// modeSource reads an 8-byte big-endian length n, then writes n bytes
	// and closes: a bulk transfer the other way.
	modeSource = 'R'
)

// sinkServer is the loopback server behind the TCP proxy in figure 6: a
// sink for bulk throughput and an echo for round trips. Both directions
// use plain read and write loops with large buffers, so that the server is
// the same for the proxied and the direct connection and is not the
// bottleneck. close stops it and waits for its goroutines.
type sinkServer struct {
	ln net.Listener
	wg sync.WaitGroup // acceptLoop and every serveConn

	// mu guards conns, the open connections that close must end.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// sinkArg, as the first argument, makes the bench a sink server in a
// process of its own: sandbox-bench sink LISTEN. Figure 6 measures the
// proxy against that process, as a proxied application is one: a client
// and an echo in one Go process hand a round trip to each other without
// the kernel waking another process, which no proxied connection can do.
const sinkArg = "sink"

// sinkMain serves on listen until it is killed.
func sinkMain(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: sandbox-bench sink LISTEN")
	}
	s, err := startSink(args[0])
	if err != nil {
		return err
	}
	s.wg.Wait()
	return nil
}

// startSink serves on addr, "127.0.0.1:0" for any free port.
func startSink(addr string) (*sinkServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &sinkServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *sinkServer) addr() string { return s.ln.Addr().String() }

// acceptLoop runs in its own goroutine; it ends when close closes the
// listener.
func (s *sinkServer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and the like: the bench's clients will report it
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// serveConn serves one connection in the mode its first byte names.
//
// serveConn runs in its own goroutine, one per connection; it ends when
// the client half-closes or the connection fails or is closed by close.
func (s *sinkServer) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return
	}
	switch mode[0] {
	case modeCount:
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		want := binary.BigEndian.Uint64(hdr[:])
		buf := make([]byte, 256<<10) // large reads, as modeSink's: io.Discard's ReadFrom reads 8 KiB at a time
		var n uint64
		for n < want {
			m, err := c.Read(buf[:min(uint64(len(buf)), want-n)])
			n += uint64(m)
			if err != nil {
				break
			}
		}
		binary.BigEndian.PutUint64(hdr[:], n)
		_, _ = c.Write(hdr[:])
	case modeSource:
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		buf := make([]byte, 256<<10)
		for left := binary.BigEndian.Uint64(hdr[:]); left > 0; {
			m, err := c.Write(buf[:min(uint64(len(buf)), left)])
			left -= uint64(m)
			if err != nil {
				return
			}
		}
	case modeSink:
		buf := make([]byte, 256<<10)
		var n uint64
		for {
			m, err := c.Read(buf)
			n += uint64(m)
			if err != nil {
				break
			}
		}
		var reply [8]byte
		binary.BigEndian.PutUint64(reply[:], n)
		_, _ = c.Write(reply[:])
	case modeEcho:
		buf := make([]byte, 64<<10)
		for {
			m, err := c.Read(buf)
			if m > 0 {
				if _, werr := c.Write(buf[:m]); werr != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
}

// close stops accepting, closes every connection and waits for every
// goroutine of s.
func (s *sinkServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
