package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Stats is what the sandbox uses, as GET /stats reads it. A resource the
// agent could not read is nil.
type Stats struct {
	Time   time.Time    `json:"time"` // when the agent read them
	CPU    *CPUStats    `json:"cpu"`
	Memory *MemoryStats `json:"memory"`
	Disk   *DiskStats   `json:"disk"`
	Agent  AgentStats   `json:"agent"`
}

// CPUStats is the CPU time the sandbox used. UsageSeconds is cumulative:
// the CPU use between two readings is the growth of UsageSeconds divided
// by the growth of Stats.Time, out of LimitCores.
type CPUStats struct {
	UsageSeconds float64 `json:"usage_seconds"`
	LimitCores   float64 `json:"limit_cores"`
	// Source is "cgroup2" or "cgroup1" for the sandbox's cgroup, "proc"
	// for the whole machine.
	Source string `json:"source"`
}

// MemoryStats is the memory the sandbox uses.
type MemoryStats struct {
	Used   uint64 `json:"used_bytes"`
	Limit  uint64 `json:"limit_bytes"` // 0 if the agent does not know it
	Source string `json:"source"`      // as CPUStats.Source
}

// DiskStats is the space of the file system of the agent's working
// directory.
type DiskStats struct {
	Path string `json:"path"`
	Used uint64 `json:"used_bytes"`
	Free uint64 `json:"free_bytes"` // what an unprivileged user may still write
	Size uint64 `json:"size_bytes"`
}

// AgentStats is the agent process's own use.
type AgentStats struct {
	RSS        uint64 `json:"rss_bytes"` // resident memory; 0 if unknown
	Goroutines int    `json:"goroutines"`
}

// Stats reads what the sandbox uses now: CPU time, memory, disk, and the
// agent's own memory.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.call(ctx, http.MethodGet, "/stats", nil, &s)
	return s, err
}

// Metrics returns the agent's Prometheus metrics, in the text format
// (version 0.0.4), for a parser such as prometheus/common's expfmt.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return nil, ctxOr(ctx, fmt.Errorf("GET /metrics: reading the reply: %w", err))
	}
	return b, nil
}
