package server

import (
	"errors"
	"net/http"
	"strconv"
	"syscall"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// move_path, copy_path and chmod_path answer with HTTP statuses as
// /files does (pathError), not the original file endpoints'
// 200-with-error, and reply {"success": true}.

// pathError is fileError, with what these operations add: a directory
// copied without recursive is 400, a non-empty directory in the way 409.
func pathError(err error) error {
	switch {
	case errors.Is(err, files.ErrNeedsRecursive):
		return &httpError{code: http.StatusBadRequest, msg: err.Error(), cause: err}
	case errors.Is(err, syscall.ENOTEMPTY):
		return &httpError{code: http.StatusConflict, msg: err.Error(), cause: err}
	}
	return fileError(err)
}

// fromTo is the body of move_path and copy_path.
type fromTo struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite"`
	ownerFields
}

func (s *Server) decodeFromTo(w http.ResponseWriter, r *http.Request) (fromTo, *files.Owner, error) {
	req, err := decode[fromTo](w, r, s.cfg.MaxBody)
	if err != nil {
		return req, nil, err
	}
	if req.From == "" || req.To == "" {
		return req, nil, errorf(http.StatusBadRequest, "from and to are required")
	}
	o, err := s.owner(req.ownerFields)
	return req, o, err
}

// handlePathMove serves POST /move_path: a rename, across file systems by
// copy and remove; 404 for a missing from, 409 for an existing to without
// overwrite.
func (s *Server) handlePathMove(w http.ResponseWriter, r *http.Request) error {
	req, o, err := s.decodeFromTo(w, r)
	if err != nil {
		return err
	}
	if err := files.Move(r.Context(), req.From, req.To, req.Overwrite, o); err != nil {
		return pathError(err)
	}
	encode(w, http.StatusOK, successReply{Success: true})
	return nil
}

// handlePathCopy serves POST /copy_path: a file, or with recursive a
// directory, copied beside to and renamed into place whole.
func (s *Server) handlePathCopy(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		fromTo
		Recursive bool `json:"recursive"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.From == "" || req.To == "" {
		return errorf(http.StatusBadRequest, "from and to are required")
	}
	o, err := s.owner(req.ownerFields)
	if err != nil {
		return err
	}
	if err := files.Copy(r.Context(), req.From, req.To, req.Overwrite, req.Recursive, o); err != nil {
		return pathError(err)
	}
	encode(w, http.StatusOK, successReply{Success: true})
	return nil
}

// handlePathChmod serves POST /chmod_path: mode is octal ("0755", "755",
// up to "7777").
func (s *Server) handlePathChmod(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		pathRequest
		Mode string `json:"mode"`
	}
	req, o, err := decodeFileOp[request](s, w, r)
	if err != nil {
		return err
	}
	m, err := strconv.ParseUint(req.Mode, 8, 32)
	if err != nil || len(req.Mode) > 4 || req.Mode[0] == '+' {
		return errorf(http.StatusBadRequest, "mode must be octal, 0 to 7777, as \"0755\": got %q", req.Mode)
	}
	if err := files.Chmod(req.Path, uint32(m), o); err != nil {
		return pathError(err)
	}
	encode(w, http.StatusOK, successReply{Success: true})
	return nil
}
