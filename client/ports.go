package client

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Health is the reply of GET /health, the one endpoint that needs no
// token.
type Health struct {
	Status    string // "ok"
	Version   string // the agent's version; empty if it did not say
	Uptime    time.Duration
	ProxyPort int // the TCP proxy's port; 0 if the agent did not say
}

// Health asks whether the agent is up.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var r struct {
		Status    string `json:"status"`
		Version   string `json:"version"`
		Uptime    int64  `json:"uptime"`
		ProxyPort string `json:"proxy_port"`
	}
	if err := c.call(ctx, http.MethodGet, "/health", nil, &r); err != nil {
		return Health{}, err
	}
	return Health{Status: r.Status, Version: r.Version, Uptime: time.Duration(r.Uptime) * time.Second,
		ProxyPort: atoi(r.ProxyPort)}, nil
}

// Ports is the state of the agent's TCP proxy.
type Ports struct {
	// Port is the sandbox port that connections to ProxyPort are
	// forwarded to; 0 if none is bound.
	Port      int
	ProxyPort int // 0 if the agent did not say
}

type portsReply struct {
	Port      string `json:"port"`
	ProxyPort string `json:"proxy_port"`
}

func (r portsReply) ports() Ports { return Ports{Port: atoi(r.Port), ProxyPort: atoi(r.ProxyPort)} }

// BindPort makes the TCP proxy forward its connections to port in the
// sandbox. If a port is already bound, it is a 409 *Error whose
// Details["current_port"] names it.
func (c *Client) BindPort(ctx context.Context, port int) (Ports, error) {
	body := struct {
		Port string `json:"port"`
	}{strconv.Itoa(port)}
	var r portsReply
	if err := c.call(ctx, http.MethodPost, "/bind_port", body, &r); err != nil {
		return Ports{}, err
	}
	return r.ports(), nil
}

// UnbindPort removes the binding, if any, and closes the connections the
// proxy is forwarding.
func (c *Client) UnbindPort(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/unbind_port", nil, nil)
}

// PortStatus returns the port bound, if any.
func (c *Client) PortStatus(ctx context.Context) (Ports, error) {
	var r portsReply
	if err := c.call(ctx, http.MethodGet, "/port_status", nil, &r); err != nil {
		return Ports{}, err
	}
	return r.ports(), nil
}

// atoi parses a port the agent sends as a string; empty or malformed is 0.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}
