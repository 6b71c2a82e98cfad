package server

import (
	"errors"
	"net/http"

	"github.com/sandbox-executor/sandbox-executor/edit"
	"github.com/sandbox-executor/sandbox-executor/files"
)

// editError turns an error of package edit into its reply, with the
// fields each conflict carries: edit_file's closest line or the lines of
// every match, apply_patch's file, hunk and nearest lines. A file that
// changed is 412, a bad request 400, a file over the edit's limit 413,
// and the file system's errors as fileError gives them.
func editError(err error) error {
	var (
		noMatch *edit.NoMatchError
		count   *edit.CountError
		hunk    *edit.HunkError
		file    *edit.FileError
	)
	conflict := func(extra map[string]any) error {
		return &httpError{code: http.StatusConflict, msg: err.Error(), extra: extra, cause: err}
	}
	switch {
	case errors.As(err, &noMatch):
		extra := map[string]any{"path": noMatch.Path}
		if noMatch.Closest != nil {
			extra["closest"] = noMatch.Closest
		}
		return conflict(extra)
	case errors.As(err, &count):
		return conflict(map[string]any{"path": count.Path, "lines": count.Lines})
	case errors.As(err, &hunk):
		return conflict(map[string]any{"file": hunk.File, "hunk": hunk.Hunk, "nearest": nonNil(hunk.Nearest)})
	case errors.As(err, &file):
		return conflict(map[string]any{"file": file.File})
	case errors.Is(err, edit.ErrConflict):
		return conflict(nil)
	case errors.Is(err, edit.ErrStale):
		return &httpError{code: http.StatusPreconditionFailed, msg: err.Error(), cause: err}
	case errors.Is(err, edit.ErrInvalid):
		return &httpError{code: http.StatusBadRequest, msg: err.Error(), cause: err}
	case errors.Is(err, files.ErrTooLarge):
		return &httpError{code: http.StatusRequestEntityTooLarge, msg: err.Error(), cause: err}
	}
	return fileError(err)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// handleFileEdit serves POST /edit_file: it replaces the exact text old
// with new, expected_count times (or every time with replace_all), and
// writes the file atomically. if_match, or the If-Match header, refuses
// with 412 if the file's ETag is another (the body's wins when both are
// given).
func (s *Server) handleFileEdit(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		edit.EditRequest
		ownerFields
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	if req.Old == "" {
		return errorf(http.StatusBadRequest, "old is required")
	}
	if req.IfMatch == "" {
		req.IfMatch = r.Header.Get("If-Match")
	}
	o, err := s.owner(req.ownerFields)
	if err != nil {
		return err
	}
	rep, err := edit.EditFile(r.Context(), req.EditRequest, o)
	if err != nil {
		return editError(err)
	}
	encode(w, http.StatusOK, rep)
	return nil
}

// handlePatchApply serves POST /apply_patch: a patch in OpenAI Codex's
// format, every hunk checked before anything is written, then every file
// changed or none.
func (s *Server) handlePatchApply(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		edit.PatchRequest
		ownerFields
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.Patch == "" {
		return errorf(http.StatusBadRequest, "patch is required")
	}
	o, err := s.owner(req.ownerFields)
	if err != nil {
		return err
	}
	rep, err := edit.ApplyPatch(r.Context(), req.PatchRequest, o)
	if err != nil {
		return editError(err)
	}
	encode(w, http.StatusOK, rep)
	return nil
}
