package server

import (
	"context"
	"net"
	"net/http"

	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
)

// connKey is the context key of the *connlimit.Conn a request came on.
type connKey struct{}

// Listener wraps ln in a connlimit.Listener with the connection cap and
// the unauthenticated timeout of s's Config, and sets srv.ConnContext
// (after any it had) so that authentication can reach each connection.
// Serve s with srv.Serve(s.Listener(srv, ln)).
func (s *Server) Listener(srv *http.Server, ln net.Listener) *connlimit.Listener {
	prev := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if lc, ok := c.(*connlimit.Conn); ok {
			ctx = context.WithValue(ctx, connKey{}, lc)
		}
		return ctx
	}
	return connlimit.NewListener(ln, s.cfg.MaxConns, s.cfg.UnauthTimeout)
}

// connOf returns the *connlimit.Conn that r came on, or nil if it did not
// come through a Listener.
func connOf(r *http.Request) *connlimit.Conn {
	c, _ := r.Context().Value(connKey{}).(*connlimit.Conn)
	return c
}
