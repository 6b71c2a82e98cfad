package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// killWait bounds how long kill_process waits for a SIGKILLed process to be
// gone before it replies.
const killWait = 3 * time.Second

// handleProcessStart serves POST /start_process. The process outlives the
// request: it is not tied to the request's context. In a session, it
// starts from the session's state, commits none, and is killed with the
// session.
func (s *Server) handleProcessStart(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[commandRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := req.checkRunOnly(); err != nil {
		return err
	}
	c, err := req.command()
	if err != nil {
		return err
	}
	ready, err := parseReady(req.Ready)
	if err != nil {
		return err
	}
	restart, err := parseRestart(req.Restart)
	if err != nil {
		return err
	}
	if c, _, err = s.sessionCommand(req.Session, string(req.User), c, false); err != nil {
		return err
	}
	p, err := s.procs.StartWith(c, procs.StartOptions{Ready: ready, Restart: restart, Name: req.Name})
	if err != nil {
		if isClientStartError(err) || errors.Is(err, procs.ErrTooMany) ||
			errors.Is(err, procs.ErrInvalidName) || errors.Is(err, procs.ErrNameTaken) {
			return err
		}
		s.log.Error().Err(err).Msg("start_process failed")
		return errorf(http.StatusInternalServerError, "Failed to start process: %v", err)
	}
	encode(w, http.StatusCreated, map[string]any{"id": p.ID, "pid": p.PID, "status": procs.StatusRunning})
	return nil
}

// processItem is one entry of /list_processes. It has exactly these keys:
// one SDK rejects any other.
type processItem struct {
	ID          string       `json:"id"`
	PID         int          `json:"pid"`
	Status      procs.Status `json:"status"`
	Command     string       `json:"command"`
	ExitCode    *int         `json:"exit_code,omitempty"`
	StartedAt   string       `json:"started_at,omitempty"`
	CompletedAt string       `json:"completed_at,omitempty"`
}

// handleProcessList serves GET /list_processes.
func (s *Server) handleProcessList(w http.ResponseWriter, r *http.Request) error {
	infos := s.procs.List()
	items := make([]processItem, len(infos)) // [] rather than null when empty
	for i, p := range infos {
		items[i] = processItem{ID: p.ID, PID: p.PID, Status: p.Status, Command: p.Command,
			ExitCode: p.ExitCode, StartedAt: formatTime(p.StartedAt), CompletedAt: formatTime(p.CompletedAt)}
	}
	encode(w, http.StatusOK, map[string]any{"processes": items})
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// handleProcessKill serves POST /kill_process. The signal, SIGKILL unless
// the request names another, goes to the process's whole group. Every
// error reply carries "success": false, as the documented ones do.
// decodeKill reads the body of /kill_process and /kill_terminal,
// {"id", "signal"?}: the id, required, and the signal, a name or a number,
// SIGKILL if absent.
func (s *Server) decodeKill(w http.ResponseWriter, r *http.Request) (id string, sig syscall.Signal, err error) {
	type request struct {
		ID     string         `json:"id"`
		Signal stringOrNumber `json:"signal"` // a name or a number
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return "", 0, err
	}
	if req.ID == "" {
		return "", 0, errorf(http.StatusBadRequest, "id is required")
	}
	if sig, err = procs.ParseSignal(string(req.Signal)); err != nil {
		return "", 0, errorf(http.StatusBadRequest, "%s", err.Error())
	}
	return req.ID, sig, nil
}

func (s *Server) handleProcessKill(w http.ResponseWriter, r *http.Request) error {
	if err := s.killProcess(w, r); err != nil {
		return withFields(err, map[string]any{"success": false})
	}
	return nil
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) error {
	id, sig, err := s.decodeKill(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), killWait)
	defer cancel()
	exited, err := s.procs.Kill(ctx, id, sig)
	if err != nil {
		return err
	}
	msg := "Process killed successfully"
	switch {
	case exited:
		p, err := s.procs.Get(id)
		if err != nil {
			return err
		}
		msg = "The command had already exited (status: " + string(p.Info().Status) + "); " +
			procs.SignalName(sig) + " was sent to the processes it left in its group"
	case sig != syscall.SIGKILL:
		msg = "Signal " + procs.SignalName(sig) + " sent to the process group"
	}
	encode(w, http.StatusOK, map[string]any{"success": true, "message": msg})
	return nil
}

// logBatch is how many lines a log stream copies out of a process per
// lock, and so the most a stalled client's handler holds.
const logBatch = 512

// handleProcessLogs serves GET (and POST) /process_logs_streaming: the
// retained lines, then live ones, then complete once the process has
// ended. Each log event's id is the line's Seq; a client that reconnects
// with Last-Event-ID (header, or last_event_id parameter) gets the lines
// after it. With follow=false it stops after the retained lines.
func (s *Server) handleProcessLogs(w http.ResponseWriter, r *http.Request) error {
	q, err := s.logsQuery(w, r)
	if err != nil {
		return err
	}
	p, err := s.procs.Get(q.id)
	sw := s.newStream(w, r)
	if err != nil {
		_ = sw.Event("error", map[string]string{"error": err.Error()})
		return nil
	}
	sub := p.Subscribe(q.after)
	defer sub.Close() // the reader is removed as soon as the handler returns

	ping := time.NewTicker(s.cfg.KeepAlive)
	defer ping.Stop()
	buf := make([]procs.Line, 0, logBatch)
	var tc timeCache
	for {
		lines, missed, ended := sub.Read(buf[:0])
		if missed > 0 {
			_ = sw.Event("missed", map[string]any{"missed": missed,
				"message": strconv.FormatUint(missed, 10) + " log lines were dropped from the buffer before they could be sent"})
		}
		for _, l := range lines {
			if l.IsEvent() {
				_ = sw.Event("restart", json.RawMessage(l.Data)) // no id: it takes no line number
				continue
			}
			prefix := tc.prefix(l.Nanos, l.Stream)
			_ = sw.AppendEventFunc(l.Seq, "log", func(b []byte) []byte {
				b = append(b, prefix...)
				b = sse.AppendJSONString(b, l.Data)
				return append(b, '}')
			})
		}
		if len(lines) == cap(buf) && sw.Err() == nil {
			continue // more is waiting: flush once caught up
		}
		if sw.Flush() != nil {
			return nil // the client left
		}
		if ended || !q.follow {
			_ = sw.Event("complete", map[string]string{"message": "stream ended"})
			return nil
		}
		select {
		case <-sub.Wake():
		case <-ping.C:
			_ = sw.PingIfIdle(s.cfg.KeepAlive) // a failed write shows at the next Flush
		case <-r.Context().Done():
			// Shutdown, or the client left: end with the final event.
			_ = sw.Event("complete", map[string]string{"message": "stream ended"})
			return nil
		}
	}
}

type logsQuery struct {
	id     string
	after  uint64
	follow bool
}

// logsQuery reads the parameters of /process_logs_streaming from the query
// string and, for POST, the JSON body.
func (s *Server) logsQuery(w http.ResponseWriter, r *http.Request) (logsQuery, error) {
	type body struct {
		ID          string         `json:"id"`
		Follow      *bool          `json:"follow"`
		LastEventID stringOrNumber `json:"last_event_id"`
	}
	var b body
	if r.Method == http.MethodPost {
		var err error
		if b, err = decode[body](w, r, s.cfg.MaxBody); err != nil {
			return logsQuery{}, err
		}
	}
	v := r.URL.Query()
	q := logsQuery{id: v.Get("id"), follow: true}
	if q.id == "" {
		q.id = b.ID
	}
	if q.id == "" {
		return q, errorf(http.StatusBadRequest, "id is required")
	}
	if f := v.Get("follow"); f != "" {
		follow, err := strconv.ParseBool(f)
		if err != nil {
			return q, errorf(http.StatusBadRequest, "follow must be true or false")
		}
		q.follow = follow
	} else if b.Follow != nil {
		q.follow = *b.Follow
	}
	var err error
	q.after, err = lastEventID(r.Header.Get("Last-Event-ID"), v.Get("last_event_id"), string(b.LastEventID))
	return q, err
}

// timeCache builds the data prefix of log events, {"timestamp":"…",
// "stream":"…","data": , reusing the last one: the lines of one read share
// their timestamp and stream.
type timeCache struct {
	nanos  int64
	stream executor.Stream
	text   []byte
}

func (c *timeCache) prefix(nanos int64, stream executor.Stream) []byte {
	if nanos != c.nanos || stream != c.stream || c.text == nil {
		c.nanos, c.stream = nanos, stream
		c.text = append(c.text[:0], `{"timestamp":"`...)
		c.text = time.Unix(0, nanos).UTC().AppendFormat(c.text, time.RFC3339Nano)
		c.text = append(c.text, `","stream":"`...)
		c.text = append(c.text, stream.String()...)
		c.text = append(c.text, `","data":`...)
	}
	return c.text
}
