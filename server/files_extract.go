package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// extractError turns the limits of files.Extract into replies naming them:
// 413 for the bytes its files hold (with max_bytes, as the upload limit's
// own 413), 400 for its entries, 408 for its time. A request whose client
// left is answered 400 (which nobody reads, and which is not logged as the
// agent's failure): the archive was not placed. Any other error is
// returned as it is.
func extractError(r *http.Request, err error, maxBytes int64) error {
	switch {
	case errors.Is(err, files.ErrArchiveTooLarge):
		return &httpError{code: http.StatusRequestEntityTooLarge, msg: err.Error(), cause: err,
			extra: map[string]any{"max_bytes": maxBytes}}
	case errors.Is(err, files.ErrArchiveTooManyEntries):
		return &httpError{code: http.StatusBadRequest, msg: err.Error(), cause: err}
	case errors.Is(err, files.ErrArchiveTimeout):
		return &httpError{code: http.StatusRequestTimeout, msg: err.Error(), cause: err}
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return &httpError{code: http.StatusBadRequest, msg: "request cancelled: the archive was not placed", cause: err}
	}
	return err
}
