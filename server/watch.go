package server

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/watch"
)

const (
	// watchBatch is how many events a stream sends before it flushes, and
	// a long poll returns at most.
	watchBatch = 1000
	// maxCoalesce bounds a watch's coalescing window.
	maxCoalesce = 10 * time.Second
)

// watchRequest is a watch's parameters, from a JSON body or the query.
type watchRequest struct {
	Path        string   `json:"path"`
	Recursive   *bool    `json:"recursive"`
	Exclude     []string `json:"exclude"`
	Include     []string `json:"include"`
	CoalesceMS  *int64   `json:"coalesce_ms"`
	IdleTimeout *float64 `json:"idle_timeout"` // POST /watches only
}

// watchQuery reads a watch's parameters from the query string: exclude
// and include are comma-separated.
func watchQuery(r *http.Request) (watchRequest, error) {
	q := r.URL.Query()
	req := watchRequest{Path: q.Get("path")}
	if v := q.Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return req, errorf(http.StatusBadRequest, "recursive must be true or false")
		}
		req.Recursive = &b
	}
	if v := q.Get("coalesce_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return req, errorf(http.StatusBadRequest, "coalesce_ms must be a whole number of milliseconds")
		}
		req.CoalesceMS = &n
	}
	req.Exclude = splitGlobs(q["exclude"])
	req.Include = splitGlobs(q["include"])
	return req, nil
}

func splitGlobs(vs []string) []string {
	var out []string
	for _, v := range vs {
		for g := range strings.SplitSeq(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				out = append(out, g)
			}
		}
	}
	return out
}

// spec validates req as a watch's Spec: the path absolute and cleaned
// (a relative one is taken from the agent's working directory).
func (req watchRequest) spec() (watch.Spec, error) {
	if req.Path == "" {
		return watch.Spec{}, errorf(http.StatusBadRequest, "path is required")
	}
	p, err := filepath.Abs(req.Path)
	if err != nil {
		return watch.Spec{}, errorf(http.StatusBadRequest, "path: %v", err)
	}
	spec := watch.Spec{Path: p, Recursive: true, Exclude: req.Exclude, Include: req.Include, Coalesce: watch.DefaultCoalesce}
	if req.Recursive != nil {
		spec.Recursive = *req.Recursive
	}
	if req.CoalesceMS != nil {
		c := time.Duration(*req.CoalesceMS) * time.Millisecond
		if *req.CoalesceMS < 0 || c > maxCoalesce {
			return watch.Spec{}, errorf(http.StatusBadRequest, "coalesce_ms must be between 0 and %d", maxCoalesce.Milliseconds())
		}
		spec.Coalesce = c
	}
	return spec, nil
}

// handleWatch serves GET (and POST) /watch: an event stream of the
// changes under path, each change and overflow numbered from 1 by its
// id. The watch lives as long as the stream; a missing path is a 404
// before the stream opens.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) error {
	req, err := watchQuery(r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodPost {
		if req, err = decode[watchRequest](w, r, s.cfg.MaxBody); err != nil {
			return err
		}
	}
	spec, err := req.spec()
	if err != nil {
		return err
	}
	wt, err := s.watches.Start(spec)
	if err != nil {
		return err
	}
	defer wt.Close()
	s.streamWatch(w, r, wt, 0)
	return nil
}

// streamWatch streams wt's events after id after until the client
// leaves, the agent shuts down or the watch ends (a kept watch deleted
// or expired): what is there, then each as it comes, with a ": ping"
// comment on idle streams.
func (s *Server) streamWatch(w http.ResponseWriter, r *http.Request, wt *watch.Watch, after uint64) {
	sw := s.newStream(w, r)
	ping := time.NewTicker(s.cfg.KeepAlive)
	defer ping.Stop()
	buf := make([]watch.Event, 0, watchBatch)
	for {
		evs, wake := wt.Read(buf[:0], after, watchBatch)
		for _, e := range evs {
			_ = sw.AppendEventFunc(e.ID, e.Type, e.AppendData)
			after = e.ID
		}
		if len(evs) == watchBatch && sw.Err() == nil {
			continue // more is waiting: flush once caught up
		}
		if sw.Flush() != nil {
			return // the client left
		}
		select {
		case <-wake:
		case <-wt.Done():
			return
		case <-ping.C:
			_ = sw.PingIfIdle(s.cfg.KeepAlive) // a failed write shows at the next Flush
		case <-r.Context().Done():
			return
		}
	}
}
