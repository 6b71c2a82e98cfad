package server

import (
	"net/http"
	"runtime"
	"time"
)

// statsReply is the body of GET /stats. A resource that could not be read
// is null.
type statsReply struct {
	Time   time.Time    `json:"time"`
	CPU    *cpuStats    `json:"cpu"`
	Memory *memoryStats `json:"memory"`
	Disk   *diskStats   `json:"disk"`
	Agent  agentStats   `json:"agent"`
}

type cpuStats struct {
	UsageSeconds float64 `json:"usage_seconds"`
	LimitCores   float64 `json:"limit_cores"`
	Source       string  `json:"source"`
}

type memoryStats struct {
	UsedBytes  uint64  `json:"used_bytes"`
	LimitBytes *uint64 `json:"limit_bytes"` // null if unknown
	Source     string  `json:"source"`
}

type diskStats struct {
	Path      string `json:"path"`
	UsedBytes uint64 `json:"used_bytes"`
	FreeBytes uint64 `json:"free_bytes"`
	SizeBytes uint64 `json:"size_bytes"`
}

type agentStats struct {
	RSSBytes   *uint64 `json:"rss_bytes"` // null if unknown
	Goroutines int     `json:"goroutines"`
}

// handleStats serves GET /stats: the sandbox's resources as one JSON
// object, read now, for interfaces that poll. CPU time is cumulative: a
// poller divides its growth between two replies by the growth of time.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	reply := statsReply{Time: time.Now().UTC(), Agent: agentStats{Goroutines: runtime.NumGoroutine()}}
	if c, err := s.res.CPU(); err == nil {
		reply.CPU = &cpuStats{UsageSeconds: c.UsageSeconds, LimitCores: c.LimitCores, Source: c.Source}
	}
	if m, err := s.res.Memory(); err == nil {
		reply.Memory = &memoryStats{UsedBytes: m.Used, Source: m.Source}
		if m.Limit > 0 {
			reply.Memory.LimitBytes = &m.Limit
		}
	}
	if d, err := s.res.Disk(); err == nil {
		reply.Disk = &diskStats{Path: d.Path, UsedBytes: d.Used, FreeBytes: d.Free, SizeBytes: d.Size}
	}
	if rss, err := s.res.AgentRSS(); err == nil {
		reply.Agent.RSSBytes = &rss
	}
	encode(w, http.StatusOK, reply)
	return nil
}
