// Package readiness waits for a port to be ready: a connection accepted
// (tcp), or an HTTP GET answered with an expected status (http), on the
// addresses a preview or a tunnel would use, 127.0.0.1 and ::1.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// The modes of a Spec.
const (
	ModeTCP  = "tcp"
	ModeHTTP = "http"
)

// Probe timing: the first probes come 50 ms apart, the gap doubling up to
// 500 ms; each probe is bounded by probeTimeout.
const (
	firstGap     = 50 * time.Millisecond
	maxGap       = 500 * time.Millisecond
	probeTimeout = time.Second
)

// Spec is what "ready" means for one port.
type Spec struct {
	Port int
	// Mode is ModeTCP (a connection is accepted) or ModeHTTP (a GET of
	// Path answers with a status in [StatusMin, StatusMax], never 5xx).
	// If empty, ModeTCP.
	Mode string
	// Path is the HTTP path; if empty, "/".
	Path string
	// StatusMin and StatusMax bound the HTTP statuses that mean ready; if
	// both are zero, 200 to 399.
	StatusMin, StatusMax int
	// Timeout bounds the whole wait; if zero, 30 s.
	Timeout time.Duration
}

func (s Spec) timeout() time.Duration {
	if s.Timeout <= 0 {
		return 30 * time.Second
	}
	return s.Timeout
}

// The reasons of a Result that is not ready.
const (
	ReasonTimeout = "timeout"
	ReasonExited  = "process_exited"
	ReasonGone    = "cancelled" // ctx ended: the client left, or the agent stops
)

// Result is how a wait ended.
type Result struct {
	Ready   bool
	Address string // "127.0.0.1" or "::1": which answered, when Ready
	Waited  time.Duration
	// Reason says why it is not Ready: ReasonTimeout, ReasonExited or
	// ReasonGone.
	Reason string
	// LastError is the last probe round's most telling error, when not
	// Ready.
	LastError string
}

// probed are the addresses probed, in order.
var probed = [...]struct {
	name string // as a Result's Address gives it
	ip   net.IP
}{{"127.0.0.1", net.IPv4(127, 0, 0, 1)}, {"::1", net.IPv6loopback}}

// Wait probes s's port until it is ready, s.Timeout passes, exited is
// closed (the process serving it ended: nil means never), or ctx ends.
// The first round of probes comes before any timer is made: a tcp probe
// needs none, and a port already listening is the common case.
func Wait(ctx context.Context, s Spec, exited <-chan struct{}) Result {
	start := time.Now()
	deadline := start.Add(s.timeout())
	var client *http.Client // only http probes need one
	if s.Mode == ModeHTTP {
		client = &http.Client{
			Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
			// A redirect is an answer: its status decides.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		defer client.CloseIdleConnections()
	}
	addr, lastErr := probeRound(ctx, deadline, client, s)
	if addr != "" {
		return Result{Ready: true, Address: addr, Waited: time.Since(start)}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for gap := firstGap; ; gap = min(2*gap, maxGap) {
		timer := time.NewTimer(gap)
		select {
		case <-timer.C:
		case <-exited:
			timer.Stop()
			return Result{Reason: ReasonExited, LastError: lastErr, Waited: time.Since(start)}
		case <-ctx.Done():
			timer.Stop()
			reason := ReasonTimeout
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				reason = ReasonGone
			}
			return Result{Reason: reason, LastError: lastErr, Waited: time.Since(start)}
		}
		if addr, lastErr = probeRound(ctx, deadline, client, s); addr != "" {
			return Result{Ready: true, Address: addr, Waited: time.Since(start)}
		}
	}
}

// probeRound probes each address once, each probe ending by probeTimeout
// or deadline, and returns the address that is ready, or the round's most
// telling error.
func probeRound(ctx context.Context, deadline time.Time, client *http.Client, s Spec) (ready, lastErr string) {
	var best probeError
	for _, a := range probed {
		end := time.Now().Add(probeTimeout)
		if deadline.Before(end) {
			end = deadline
		}
		err := probe(ctx, end, client, s, a.name, a.ip)
		if err == nil {
			return a.name, ""
		}
		if err.rank > best.rank || best.msg == "" {
			best = *err
		}
	}
	if best.rank == rankRefused {
		if other := listeningElsewhere(s.Port); other != "" {
			return "", fmt.Sprintf("port %d is listening only on %s, which previews and tunnels do not reach: bind it to 127.0.0.1, ::1, 0.0.0.0 or ::", s.Port, other)
		}
	}
	return "", best.msg
}

// probeError is one probe's failure; rank says how telling it is: an HTTP
// status says more than a refused connection.
type probeError struct {
	rank int
	msg  string
}

const (
	rankRefused = iota + 1
	rankOther
	rankStatus
)

func probe(ctx context.Context, deadline time.Time, client *http.Client, s Spec, addr string, ip net.IP) *probeError {
	if s.Mode != ModeHTTP {
		if err := dialTCP(ctx, deadline, ip, s.Port); err != nil {
			return dialError(addr, err)
		}
		return nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	hostPort := net.JoinHostPort(addr, strconv.Itoa(s.Port))
	path := s.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostPort+path, nil)
	if err != nil {
		return &probeError{rankOther, err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		return dialError(addr, err)
	}
	_ = resp.Body.Close()
	lo, hi := s.StatusMin, s.StatusMax
	if lo == 0 && hi == 0 {
		lo, hi = 200, 399
	}
	if resp.StatusCode >= lo && resp.StatusCode <= hi && resp.StatusCode < 500 {
		return nil
	}
	return &probeError{rankStatus, fmt.Sprintf("%s: GET %s answered %d", addr, path, resp.StatusCode)}
}

func dialError(addr string, err error) *probeError {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &probeError{rankRefused, fmt.Sprintf("%s: %v", addr, op.Err)}
	}
	return &probeError{rankOther, fmt.Sprintf("%s: %v", addr, err)}
}
