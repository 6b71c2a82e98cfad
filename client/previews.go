package client

import (
	"context"
	"net/http"
)

// ExposedPort is a port of the sandbox reachable by host name: a request
// whose host starts with "PORT-" goes to it.
type ExposedPort struct {
	Port   int
	Public bool // requests by host name need no token
}

// ExposePort makes port reachable by host name (8000-mysandbox.example.com
// for port 8000), with or without the token. Exposing it again sets
// public anew. The agent's own ports are a 400 *Error.
func (c *Client) ExposePort(ctx context.Context, port int, public bool) error {
	body := struct {
		Port   int  `json:"port"`
		Public bool `json:"public"`
	}{port, public}
	return c.call(ctx, http.MethodPost, "/expose_port", body, nil)
}

// UnexposePort stops routing host names to port and ends the requests in
// flight that way. It reports whether port was exposed.
func (c *Client) UnexposePort(ctx context.Context, port int) (bool, error) {
	body := struct {
		Port int `json:"port"`
	}{port}
	var r struct {
		Removed bool `json:"removed"`
	}
	err := c.call(ctx, http.MethodPost, "/unexpose_port", body, &r)
	return r.Removed, err
}

// ExposedPorts returns the exposed ports, by port number.
func (c *Client) ExposedPorts(ctx context.Context) ([]ExposedPort, error) {
	var r struct {
		Ports []struct {
			Port   int  `json:"port"`
			Public bool `json:"public"`
		} `json:"ports"`
	}
	if err := c.call(ctx, http.MethodGet, "/list_exposed_ports", nil, &r); err != nil {
		return nil, err
	}
	ports := make([]ExposedPort, len(r.Ports))
	for i, p := range r.Ports {
		ports[i] = ExposedPort{Port: p.Port, Public: p.Public}
	}
	return ports, nil
}
