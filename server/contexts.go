package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/executor"
)

// defaultIdleTimeout is a context's idle_timeout when the request gives none.
const defaultIdleTimeout = 1800 * time.Second

// handleContextCreate serves POST /create_context: it starts an
// interpreter whose state lasts between /run_code calls, and replies 201
// once its worker is ready.
func (s *Server) handleContextCreate(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Language    string            `json:"language"`
		Cwd         string            `json:"cwd"`
		Env         map[string]string `json:"env"`
		Session     string            `json:"session"`
		User        stringOrNumber    `json:"user"`
		Limits      json.RawMessage   `json:"limits"` // see parseLimits; a session's are the defaults
		IdleTimeout *float64          `json:"idle_timeout"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	lim, err := parseLimits(req.Limits)
	if err != nil {
		return err
	}
	cfg, err := s.contextConfig(req.Language, req.Cwd, req.Env, string(req.User))
	if err != nil {
		return err
	}
	cfg.Limits = lim
	if req.Session != "" {
		if cfg, err = s.sessionContext(req.Session, cfg); err != nil {
			return err
		}
	}
	if cfg.Dir != "" {
		if err := checkContextDir(cfg.Dir); err != nil {
			return err
		}
	}
	if err := s.checkLimits(cfg.Limits); err != nil {
		return err
	}
	cfg.IdleTimeout = defaultIdleTimeout
	if req.IdleTimeout != nil {
		if cfg.IdleTimeout, err = seconds("idle_timeout", req.IdleTimeout); err != nil {
			return err
		}
	}
	c, err := s.contexts.Create(r.Context(), cfg)
	if err != nil {
		return contextError(err)
	}
	st := c.Status()
	encode(w, http.StatusCreated, map[string]any{"id": st.ID, "language": st.Language, "generation": st.Generation, "pid": st.Pid})
	return nil
}

// contextConfig checks what a context is to be created with: its
// language (and its interpreter on PATH) and user. The caller checks the
// directory, which a session may make relative to its own.
func (s *Server) contextConfig(lang, cwd string, env map[string]string, user string) (contexts.Config, error) {
	cfg := contexts.Config{Language: lang, Dir: cwd, Env: env}
	if lang == "" {
		return cfg, errorf(http.StatusBadRequest, "language is required")
	}
	if err := s.contexts.CheckLanguage(lang); err != nil {
		return cfg, contextError(err)
	}
	if user != "" {
		u, err := s.runner.LookupUser(user)
		if err != nil {
			return cfg, err
		}
		cfg.User = u
	}
	return cfg, nil
}

// sessionContext makes cfg start from session id's state (its cwd,
// environment and user; cfg's own cwd and env laid over them; its limits
// as the defaults of cfg's, key by key) and die with the session.
func (s *Server) sessionContext(id string, cfg contexts.Config) (contexts.Config, error) {
	c, err := s.sessions.Background(id, executor.Command{Dir: cfg.Dir, Env: cfg.Env, User: cfg.User, Limits: cfg.Limits})
	if err != nil {
		return cfg, err
	}
	cfg.Dir, cfg.BaseEnv, cfg.Env, cfg.User, cfg.Limits = c.Dir, c.BaseEnv, c.Env, c.User, c.Limits
	cfg.Alive = func() bool {
		// List, not User: asking must not count as using the session,
		// which would keep it from expiring.
		for _, in := range s.sessions.List() {
			if in.ID == id {
				return true
			}
		}
		return false
	}
	return cfg, nil
}

// contextError is the reply to a contexts error that is not the client's
// to act on by its text alone.
func contextError(err error) error {
	var he *httpError
	if errors.As(err, &he) || isContextClientError(err) {
		return err
	}
	return &httpError{code: http.StatusInternalServerError, msg: "failed to start the interpreter", cause: err}
}

func isContextClientError(err error) bool {
	for _, row := range errorStatuses {
		if errors.Is(err, row.err) {
			return true
		}
	}
	return false
}

// handleContextList serves GET /list_contexts.
func (s *Server) handleContextList(w http.ResponseWriter, r *http.Request) error {
	encode(w, http.StatusOK, map[string]any{"contexts": s.contexts.List()})
	return nil
}

// handleContextStatus serves GET /context_status?id=: a context's state,
// and the end of its last call's output if that call's client left.
func (s *Server) handleContextStatus(w http.ResponseWriter, r *http.Request) error {
	c, err := s.contexts.Get(r.URL.Query().Get("id"))
	if err != nil {
		return err
	}
	st := c.Status()
	body := map[string]any{"id": st.ID, "language": st.Language, "generation": st.Generation,
		"busy": st.Busy, "execution_count": st.ExecutionCount, "last_status": st.LastStatus}
	if st.LastOutput != nil {
		body["last_output"] = *st.LastOutput
	}
	if !st.Limits.IsZero() {
		body["limits"] = st.Limits
	}
	encode(w, http.StatusOK, body)
	return nil
}

// handleContextDelete serves POST /delete_context: the interpreter and
// its whole process group are killed.
func (s *Server) handleContextDelete(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		ID string `json:"id"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := s.contexts.Delete(req.ID); err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"deleted": true, "id": req.ID})
	return nil
}

// handleContextInterrupt serves POST /interrupt_context: SIGINT to the
// running code, a kill and restart if it has not stopped after the grace
// period; the reply comes once it has stopped.
func (s *Server) handleContextInterrupt(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		ID string `json:"id"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	c, err := s.contexts.Get(req.ID)
	if err != nil {
		return err
	}
	res, err := c.Interrupt(r.Context())
	if err != nil {
		return err
	}
	encode(w, http.StatusOK, res)
	return nil
}

// handleContextRunCode serves POST /run_code: code run in a context (or,
// without one, in a fresh context of language removed after), answered as
// an event stream while it runs, then complete. The code runs to its end
// even if the client leaves.
func (s *Server) handleContextRunCode(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Context            string   `json:"context"`
		Language           string   `json:"language"`
		Code               string   `json:"code"`
		Timeout            *float64 `json:"timeout"`
		ExpectedGeneration *int     `json:"expected_generation"`
		Queue              bool     `json:"queue"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	run := contexts.RunRequest{Code: req.Code, Queue: req.Queue}
	if req.Timeout != nil && *req.Timeout <= 0 {
		return errorf(http.StatusBadRequest, "timeout must be a number of seconds greater than 0")
	}
	if run.Timeout, err = seconds("timeout", req.Timeout); err != nil {
		return err
	}
	if req.ExpectedGeneration != nil {
		if *req.ExpectedGeneration < 1 {
			return errorf(http.StatusBadRequest, "expected_generation must be 1 or more")
		}
		run.ExpectedGeneration = *req.ExpectedGeneration
	}
	c, err := s.runCodeContext(r.Context(), req.Context, req.Language)
	if err != nil {
		return err
	}
	call, err := c.Run(r.Context(), run)
	if err != nil {
		if req.Context == "" {
			_ = s.contexts.Delete(c.ID())
		}
		var re *contexts.RestartedError
		if errors.As(err, &re) {
			return withFields(errorf(http.StatusConflict, "%s", err), map[string]any{"generation": re.Generation})
		}
		return err
	}
	defer call.Detach() // a client gone: the code runs on, its output kept for context_status
	return s.streamCall(w, r, call)
}

// runCodeContext returns the context named id, or a new hidden one of
// lang for a stateless run.
func (s *Server) runCodeContext(ctx context.Context, id, lang string) (*contexts.Context, error) {
	if id != "" {
		return s.contexts.Get(id)
	}
	cfg, err := s.contextConfig(lang, "", nil, "")
	if err != nil {
		return nil, err
	}
	cfg.Hidden = true
	c, err := s.contexts.Create(ctx, cfg)
	if err != nil {
		return nil, contextError(err)
	}
	return c, nil
}

// streamCall sends call's events as they come, then its complete.
func (s *Server) streamCall(w http.ResponseWriter, r *http.Request, call *contexts.Call) error {
	sw := s.newStream(w, r)
	ping := time.NewTicker(s.cfg.KeepAlive)
	defer ping.Stop()
	for {
		evs, comp := call.Take()
		for _, ev := range evs {
			if err := sw.AppendEvent("", ev.Name, mustJSON(ev.Data)); err != nil {
				return nil // the client left
			}
		}
		if comp != nil {
			_ = sw.Event("complete", comp)
			return nil
		}
		if sw.Flush() != nil {
			return nil
		}
		select {
		case <-call.Ready():
		case <-ping.C:
			if sw.PingIfIdle(s.cfg.KeepAlive) != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		}
	}
}

// checkContextDir returns a 400 unless dir is a directory.
func checkContextDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return errorf(http.StatusBadRequest, "cwd is not a directory: %s", dir)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every event's data is built of strings, numbers and raw JSON
		// the worker sent and that was parsed: it always encodes.
		panic(fmt.Sprintf("contexts: event data does not encode: %v", err))
	}
	return b
}
