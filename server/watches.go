package server

import (
	"context"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sandbox-executor/sandbox-executor/watch"
)

const (
	// defaultPollTimeout and maxPollTimeout bound a long poll of a kept
	// watch.
	defaultPollTimeout = 30 * time.Second
	maxPollTimeout     = 60 * time.Second
	// maxIdleTimeout bounds a kept watch's idle_timeout.
	maxIdleTimeout = 24 * time.Hour
	// defaultWaitTimeout is wait_for_path's timeout unless it names one.
	defaultWaitTimeout = 30 * time.Second
)

// handleWatchCreate serves POST /watches: a watch the agent keeps for
// idle_timeout seconds after each poll, for clients that poll or that
// resume a stream with Last-Event-ID.
func (s *Server) handleWatchCreate(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[watchRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	spec, err := req.spec()
	if err != nil {
		return err
	}
	idle := watch.DefaultIdleTimeout
	if req.IdleTimeout != nil {
		if d := *req.IdleTimeout; d <= 0 || d > maxIdleTimeout.Seconds() {
			return errorf(http.StatusBadRequest, "idle_timeout must be more than 0 and at most %d seconds", int(maxIdleTimeout.Seconds()))
		}
		idle = time.Duration(*req.IdleTimeout * float64(time.Second))
	}
	k, err := s.watches.Keep(spec, idle)
	if err != nil {
		return err
	}
	encode(w, http.StatusCreated, map[string]any{"id": k.ID, "path": spec.Path, "idle_timeout": k.Idle.Seconds()})
	return nil
}

// handleWatchEvents serves GET /watches/{id}/events: with Accept:
// text/event-stream, the kept watch's event stream (Last-Event-ID
// resumes after that id); else a long poll of the events after cursor.
func (s *Server) handleWatchEvents(w http.ResponseWriter, r *http.Request) error {
	k, err := s.watches.Get(r.PathValue("id"))
	if err != nil {
		return err
	}
	if accepts(r, "text/event-stream") {
		after, err := lastEventID(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id"), "")
		if err != nil {
			return err
		}
		detach := k.Attach()
		defer detach()
		s.streamWatch(w, r, k.Watch, after)
		return nil
	}
	return s.pollWatch(w, r, k)
}

// pollWatch answers the events of k after cursor as soon as one exists,
// at most watchBatch of them, or none once timeout seconds have passed.
func (s *Server) pollWatch(w http.ResponseWriter, r *http.Request, k *watch.Kept) error {
	q := r.URL.Query()
	var cursor uint64
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, "cursor must be an event id")
		}
		cursor = n
	}
	timeout, err := durationParam(q.Get("timeout"), defaultPollTimeout, maxPollTimeout, "timeout")
	if err != nil {
		return err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		evs, wake := k.Watch.Read(nil, cursor, watchBatch)
		if len(evs) > 0 {
			k.Touch()
			encode(w, http.StatusOK, watchEventsReply(evs))
			return nil
		}
		select {
		case <-wake:
			continue
		case <-timer.C:
		case <-k.Watch.Done():
		case <-r.Context().Done():
		}
		k.Touch()
		encode(w, http.StatusOK, map[string]any{"events": []any{}, "cursor": cursor})
		return nil
	}
}

func watchEventsReply(evs []watch.Event) map[string]any {
	type item struct {
		ID   uint64 `json:"id"`
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	items := make([]item, len(evs))
	for i, e := range evs {
		items[i] = item{ID: e.ID, Type: e.Type, Data: e.Data()}
	}
	return map[string]any{"events": items, "cursor": evs[len(evs)-1].ID}
}

// durationParam parses v, a number of seconds, def if empty; past max or not
// positive it is a 400 naming field.
func durationParam(v string, def, max time.Duration, field string) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || f > max.Seconds() || math.IsInf(f, 0) {
		return 0, errorf(http.StatusBadRequest, "%s must be a number of seconds, more than 0 and at most %d", field, int(max.Seconds()))
	}
	return time.Duration(f * float64(time.Second)), nil
}

// handleWatchDelete serves DELETE /watches/{id}.
func (s *Server) handleWatchDelete(w http.ResponseWriter, r *http.Request) error {
	if err := s.watches.Delete(r.PathValue("id")); err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

// handleWaitForPath serves POST /wait_for_path: it answers as soon as
// path exists (or, with exists false, is gone), or after timeout seconds
// with timed_out. It watches the path's deepest existing directory: it
// never polls the disk.
func (s *Server) handleWaitForPath(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path    string   `json:"path"`
		Exists  *bool    `json:"exists"`
		Timeout *float64 `json:"timeout"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.Path == "" {
		return errorf(http.StatusBadRequest, "path is required")
	}
	p, err := filepath.Abs(req.Path)
	if err != nil {
		return errorf(http.StatusBadRequest, "path: %v", err)
	}
	exists := req.Exists == nil || *req.Exists
	timeout := defaultWaitTimeout
	if req.Timeout != nil {
		if timeout, err = durationParam(strconv.FormatFloat(*req.Timeout, 'f', -1, 64), 0, watch.MaxWaitTimeout, "timeout"); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ok, err := s.watches.WaitForPath(ctx, p, exists)
	if err != nil {
		return err
	}
	if !ok && r.Context().Err() != nil {
		return errorf(http.StatusServiceUnavailable, "the agent is shutting down") // or the client left
	}
	encode(w, http.StatusOK, map[string]any{"path": p, "exists": exists == ok, "timed_out": !ok})
	return nil
}
