package server

import (
	"errors"
	"net/http"
	"path/filepath"

	"github.com/sandbox-executor/sandbox-executor/checkpoint"
)

// checkpointStore returns the Server's checkpoint store, or a 503 if the
// agent has none (its state directory could not be made).
func (s *Server) checkpointStore() (*checkpoint.Store, error) {
	if s.checkpoints == nil {
		return nil, errorf(http.StatusServiceUnavailable, "checkpoints are unavailable: no state directory (-state-dir)")
	}
	return s.checkpoints, nil
}

// absPath is path made absolute (from the agent's working directory)
// and cleaned; empty is a 400 naming field.
func absPath(path, field string) (string, error) {
	if path == "" {
		return "", errorf(http.StatusBadRequest, "%s is required", field)
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return "", errorf(http.StatusBadRequest, "%s: %v", field, err)
	}
	return p, nil
}

// handleCheckpointCreate serves POST /create_checkpoint: a record of every
// file under path, and their content stored once. 507 past the budget,
// with nothing stored.
func (s *Server) handleCheckpointCreate(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path    string   `json:"path"`
		Name    string   `json:"name"`
		Exclude []string `json:"exclude"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	st, err := s.checkpointStore()
	if err != nil {
		return err
	}
	p, err := absPath(req.Path, "path")
	if err != nil {
		return err
	}
	m, err := st.Create(r.Context(), p, req.Name, req.Exclude)
	if errors.Is(err, checkpoint.ErrBudget) {
		return &httpError{code: http.StatusInsufficientStorage, msg: err.Error(), extra: map[string]any{"budget": st.Budget()}}
	}
	if err != nil {
		return err
	}
	sum := st.List()
	for _, c := range sum {
		if c.ID == m.ID {
			encode(w, http.StatusCreated, c)
			return nil
		}
	}
	return errorf(http.StatusInternalServerError, "checkpoint %s vanished", m.ID)
}

// handleCheckpointChanges serves GET /changes?path=P&since=ID[&diff=true]:
// what changed under path since checkpoint ID (HEAD: the path's last).
func (s *Server) handleCheckpointChanges(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	st, err := s.checkpointStore()
	if err != nil {
		return err
	}
	since := q.Get("since")
	if since == "" {
		return errorf(http.StatusBadRequest, "since is required: a checkpoint id, or HEAD")
	}
	var p string
	if q.Get("path") != "" || since == "HEAD" {
		if p, err = absPath(q.Get("path"), "path"); err != nil {
			return err
		}
	}
	withDiff, err := queryBool(q, "diff")
	if err != nil {
		return errorf(http.StatusBadRequest, "diff must be true or false")
	}
	m, err := st.Get(since, p)
	if err != nil {
		return err
	}
	if p != "" && p != m.Path {
		return errorf(http.StatusBadRequest, "checkpoint %s is of %s, not %s", m.ID, m.Path, p)
	}
	ch, err := st.Changes(r.Context(), m, withDiff)
	if err != nil {
		return err
	}
	reply := map[string]any{"added": ch.Added, "modified": ch.Modified, "deleted": ch.Deleted, "mode_changed": ch.ModeChanged}
	if withDiff {
		reply["diff"] = ch.Diff
		reply["truncated"] = ch.DiffTruncated
	}
	encode(w, http.StatusOK, reply)
	return nil
}

// handleCheckpointRestore serves POST /restore_checkpoint: the directory
// made what it was at the checkpoint, each file written atomically.
func (s *Server) handleCheckpointRestore(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		ID          string `json:"id"`
		DeleteAdded *bool  `json:"delete_added"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.ID == "" {
		return errorf(http.StatusBadRequest, "id is required")
	}
	st, err := s.checkpointStore()
	if err != nil {
		return err
	}
	m, err := st.Get(req.ID, "")
	if err != nil {
		return err
	}
	res, err := st.Restore(r.Context(), m, req.DeleteAdded == nil || *req.DeleteAdded)
	if err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"restored": res.Restored, "deleted": res.Deleted, "mode_changed": res.ModeChanged})
	return nil
}

// handleCheckpointList serves GET /list_checkpoints, oldest first.
func (s *Server) handleCheckpointList(w http.ResponseWriter, r *http.Request) error {
	st, err := s.checkpointStore()
	if err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"checkpoints": st.List(), "stored_bytes": st.Stored(), "budget": st.Budget()})
	return nil
}

// handleCheckpointDelete serves POST /delete_checkpoint: the content no
// other checkpoint uses is freed.
func (s *Server) handleCheckpointDelete(w http.ResponseWriter, r *http.Request) error {
	id, err := decodeID(w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	st, err := s.checkpointStore()
	if err != nil {
		return err
	}
	freed, err := st.Delete(id)
	if err != nil {
		return err
	}
	encode(w, http.StatusOK, map[string]any{"success": true, "freed_bytes": freed})
	return nil
}
