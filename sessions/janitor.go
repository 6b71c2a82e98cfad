package sessions

import (
	"context"
	"time"
)

// janitorMaxWait is the longest the janitor sleeps when no session is due
// sooner.
const janitorMaxWait = time.Hour

// janitor deletes each session that has been idle for its IdleTimeout, as
// Delete does: idle means no /run or /run_streaming command of it running,
// and none of its requests (creation, reuse, a command's start or end, a
// background process's start), nor a call of its Toucher (a client using
// one of its terminals), for that long. Running background processes do
// not keep a session in use.
//
// janitor runs in its own goroutine, started by New; it ends when Close
// cancels ctx.
func (r *Registry) janitor(ctx context.Context) {
	defer r.wg.Done()
	timer := time.NewTimer(janitorMaxWait)
	defer timer.Stop()
	for {
		timer.Reset(r.expire(ctx))
		select {
		case <-timer.C:
		case <-r.kick:
		case <-ctx.Done():
			return
		}
	}
}

// kickJanitor makes the janitor look again: a session's deadline may now
// come before the one it sleeps until.
func (r *Registry) kickJanitor() {
	select {
	case r.kick <- struct{}{}:
	default: // a kick is pending already
	}
}

// expire deletes the sessions idle for their IdleTimeout and returns how
// long until the next one may be.
func (r *Registry) expire(ctx context.Context) time.Duration {
	now := time.Now()
	next := janitorMaxWait
	var expired []*Session
	r.mu.Lock()
	for id, s := range r.sessions {
		left, idle := s.idleLeft(now)
		switch {
		case !idle:
		case left <= 0:
			delete(r.sessions, id)
			expired = append(expired, s)
		default:
			next = min(next, left)
		}
	}
	r.mu.Unlock()
	for _, s := range expired {
		dctx, cancel := context.WithTimeout(ctx, r.opts.killWait())
		_ = s.destroy(dctx) // a workdir that cannot be removed stays; nobody is waiting for the error
		cancel()
	}
	return next
}

// Toucher returns a function that marks session id used now, as a request
// to it does, for activity the API sees outside the session's requests:
// traffic on the WebSocket of one of its terminals. The function holds
// the session itself, not its id, so it never touches a later session of
// the same id, and it costs one lock. It returns an error wrapping
// ErrNotFound for an unknown id.
func (r *Registry) Toucher(id string) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return nil, notFound(id)
	}
	return s.touch, nil
}

// idleLeft returns how long s has left before it expires, and whether it
// is idle at all: it has an idle timeout and no foreground command.
func (s *Session) idleLeft(now time.Time) (time.Duration, bool) {
	if s.idle <= 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls > 0 {
		return 0, false
	}
	return s.idle - now.Sub(s.lastUsed), true
}
