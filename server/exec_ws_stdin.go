package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// An /exec_ws request with "stdin_raw": true gets a side channel for its
// command's stdin: started carries a stdin_id, and a raw /write_stdin
// with that id streams its body into the command's stdin, unframed and
// unmasked, so that the agent can splice it from the socket into the pipe
// (see stdin_splice.go) as it does for a background process. A
// WebSocket's input is masked and framed, and must be copied through the
// agent twice.
//
// The side channel is attached at most once. From then on it owns the
// command's stdin: channel-0 frames are refused (close 1008), so that the
// two never interleave, and the end of its body, whatever ends it, closes
// stdin after its last byte. The exec ending (or its client leaving,
// which kills the command) ends the side request: the process's end stops
// any write still waiting for it.

// stdinIDPrefix starts every side channel's id, so that /write_stdin
// tells one from a background process's id.
const stdinIDPrefix = "exec-stdin-"

// errExecEnded is a side request's error once its exec has ended: a 409.
var errExecEnded = fmt.Errorf("%w: the exec ended", executor.ErrStdinClosed)

// sideStdin is the side channel of one /exec_ws command.
type sideStdin struct {
	id       string
	p        *executor.Process
	attached atomic.Bool
	ended    chan struct{} // closed by remove, once the command has ended
}

// attach reports whether this call attached the side channel: only the
// first does.
func (c *sideStdin) attach() bool { return c.attached.CompareAndSwap(false, true) }

// execStdins is the server's side channels by id. The zero value is ready.
type execStdins struct {
	mu sync.Mutex // guards m
	m  map[string]*sideStdin
}

// add registers a side channel for p and returns it; the caller removes
// it once the command has ended.
func (s *execStdins) add(p *executor.Process) *sideStdin {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails on Linux
	c := &sideStdin{id: stdinIDPrefix + hex.EncodeToString(b), p: p, ended: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]*sideStdin)
	}
	s.m[c.id] = c
	return c
}

// remove unregisters c, once its command has ended, and closes c.ended;
// again, it does nothing. A nil c is none.
func (s *execStdins) remove(c *sideStdin) {
	if c == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[c.id]; ok {
		delete(s.m, c.id)
		close(c.ended)
	}
}

func (s *execStdins) get(id string) *sideStdin {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

// writeExecStdin serves a raw /write_stdin whose id is a side channel's:
// 404 for one that is not (or no longer) there, 409 if it was attached
// before; else the body goes into the command's stdin, which is closed at
// its end. No stall time applies on either side: the command may read
// slowly (the upload waits: backpressure), the client may send slowly (a
// terminal, `tail -f`); the exec's end, or its client's, ends the upload.
func (s *Server) writeExecStdin(w http.ResponseWriter, r *http.Request, id string) error {
	c := s.execStdins.get(id)
	if c == nil {
		return errorf(http.StatusNotFound, "no exec with this stdin_id: it has ended, or never was")
	}
	if !c.attach() {
		return errorf(http.StatusConflict, "this exec's stdin side channel was already attached")
	}
	write := func(ctx context.Context, src io.Reader) (int64, error) {
		n, err := c.p.WriteStdin(ctx, src, 0)
		_ = c.p.CloseStdin() // EOF after the last byte, however the body ended
		select {
		case <-c.ended:
			if err != nil { // whatever the body's read saw: the exec ended it
				err = errExecEnded
			}
		default:
		}
		return n, err
	}
	if (canSplice(r) || isChunked(r)) && s.writeStdinSpliced(w, r, write, c.ended) {
		return nil
	}
	body := newProgressReader(w, r)
	body.idle = 0 // a client may send slowly: the exec's own liveness bounds it
	// A read of net/http's body waiting for the client is not the write's
	// to stop (a spliced one is: see stdinWriter.stopLocked), so the end
	// of the command wakes it with a read deadline in the past.
	stop := make(chan struct{})
	watched := make(chan struct{})
	go endBodyWith(c.ended, stop, watched, func() { _ = body.rc.SetReadDeadline(aLongTimeAgo) })
	n, err := write(r.Context(), body)
	close(stop)
	<-watched
	body.Done()
	if err != nil {
		return s.rawWriteError(n, err)
	}
	encode(w, http.StatusOK, stdinReply{Success: true, Written: n})
	return nil
}

// endBodyWith calls wake once ended is closed: it sets a read deadline in
// the past, which ends a read of the body waiting for the client. It runs
// in its own goroutine, owned by the handler that started it; it ends
// when ended or stop is closed, and then closes watched.
func endBodyWith(ended, stop <-chan struct{}, watched chan<- struct{}, wake func()) {
	defer close(watched)
	select {
	case <-ended:
		wake()
	case <-stop:
	}
}
