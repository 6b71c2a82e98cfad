package h1

import (
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The idle pool: per host a stack, so that the connection used last, the
// one least likely to have been closed by the app, is used first. One
// timer, armed while any connection is idle, closes those idle for longer
// than IdleTimeout.

// getIdle takes the newest idle connection to host that is still quiet
// (see quiet); nil if none.
func (t *Transport) getIdle(host string) *conn {
	for {
		c := t.popIdle(host)
		if c == nil || quiet(c.nc) {
			return c
		}
		c.nc.Close()
	}
}

// popIdle takes the newest idle connection to host; nil if none.
func (t *Transport) popIdle(host string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.idle[host]
	if len(s) == 0 {
		return nil
	}
	c := s[len(s)-1]
	s[len(s)-1] = nil
	t.idle[host] = s[:len(s)-1]
	t.nIdle--
	return c
}

// quiet reports whether nc, idle, has nothing to read: neither the app's
// close (which the retry in RoundTrip would also cover) nor bytes it sent
// unasked, which would be read as the next request's reply. One
// non-blocking peek, as http.Transport learns the same from the read it
// keeps going on every idle connection. A connection that cannot be
// peeked at counts as quiet.
func quiet(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var b [1]byte
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true // never wait: an answer of EAGAIN is the one wanted
	})
	return err == nil && errors.Is(perr, unix.EAGAIN)
}

// putIdle keeps c for reuse, or closes it if the pool is full.
func (t *Transport) putIdle(c *conn) {
	t.mu.Lock()
	if t.nIdle >= t.MaxIdle || len(t.idle[c.host]) >= t.MaxIdlePerHost {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	if t.idle == nil {
		t.idle = make(map[string]conns)
	}
	c.since = time.Now()
	t.idle[c.host] = append(t.idle[c.host], c)
	t.nIdle++
	if t.sweep == nil && t.IdleTimeout > 0 {
		t.sweep = time.AfterFunc(t.IdleTimeout, t.closeExpired)
	}
	t.mu.Unlock()
}

// closeExpired is the sweep timer's function: it closes the connections
// idle for IdleTimeout or longer and arms the timer again for the next
// to expire, if any are left.
func (t *Transport) closeExpired() {
	t.mu.Lock()
	var expired []*conn
	now := time.Now()
	next := time.Duration(0)
	for host, s := range t.idle {
		// Oldest first: the expired ones are a prefix.
		n := 0
		for n < len(s) && now.Sub(s[n].since) >= t.IdleTimeout {
			n++
		}
		expired = append(expired, s[:n]...)
		rest := append(conns(nil), s[n:]...)
		if len(rest) == 0 {
			delete(t.idle, host)
			continue
		}
		t.idle[host] = rest
		if left := t.IdleTimeout - now.Sub(rest[0].since); next == 0 || left < next {
			next = left
		}
	}
	t.nIdle -= len(expired)
	t.sweep = nil
	if next > 0 {
		t.sweep = time.AfterFunc(next, t.closeExpired)
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.nc.Close()
	}
}

// CloseIdleConnections closes every idle connection, the fallback's too.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.nIdle = nil, 0
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, s := range idle {
		for _, c := range s {
			c.nc.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

var _ http.RoundTripper = (*Transport)(nil)
