package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// A background process started with "stdin": true keeps a pipe to its
// standard input, written with /write_stdin and closed with /close_stdin.
// "input" on /run, /run_streaming and /start_process is written by the
// executor itself; see executor/stdin.go.

// rawContentType is the Content-Type of a /write_stdin body that is the
// data itself rather than JSON.
const rawContentType = "application/octet-stream"

// isRawBody reports whether r's body is labelled as raw bytes, which
// /write_stdin reads as such; every other body is read as JSON.
func isRawBody(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == rawContentType
}

// stdinReply is the reply of a write that went through.
type stdinReply struct {
	Success bool  `json:"success"`
	Written int64 `json:"written"`
}

// handleStdinWrite serves POST /write_stdin. A JSON body
// {"id","data","is_base64"} is bounded by the body limit; a raw body
// (Content-Type: application/octet-stream, the id in the query) is
// streamed into the pipe as it arrives, in constant memory, whatever its
// size. Either way the data goes in whole, under the process's write
// lock, or the error says how much of it was written.
func (s *Server) handleStdinWrite(w http.ResponseWriter, r *http.Request) error {
	if isRawBody(r) {
		return s.writeStdinRaw(w, r)
	}
	type request struct {
		ID       string `json:"id"`
		Data     string `json:"data"`
		IsBase64 bool   `json:"is_base64"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if req.ID == "" {
		return errorf(http.StatusBadRequest, "id is required")
	}
	var src io.Reader = strings.NewReader(req.Data)
	if req.IsBase64 {
		data, err := base64.StdEncoding.DecodeString(req.Data)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid base64 data: %v", err)
		}
		src = bytes.NewReader(data)
	}
	p, err := s.procs.Get(req.ID)
	if err != nil {
		return stdinError(0, err)
	}
	// The body has been read, so net/http watches the connection: the
	// request's context ends when the client leaves, and so does a write
	// waiting for a process that does not read.
	n, err := p.WriteStdin(r.Context(), src, 0)
	if err != nil {
		return stdinError(n, err)
	}
	encode(w, http.StatusOK, stdinReply{Success: true, Written: n})
	return nil
}

// writeStdinRaw serves the raw form of /write_stdin. Until the body has
// been read to its end, net/http does not watch the connection, so a
// client that leaves while the process does not read would go unnoticed:
// the write therefore also gives up once the process has taken nothing
// for the body timeout, as the body's reads do when the client sends
// nothing.
func (s *Server) writeStdinRaw(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id == "" {
		return errorf(http.StatusBadRequest, "id is required (in the query, ?id=, for a raw body)")
	}
	if strings.HasPrefix(id, stdinIDPrefix) {
		return s.writeExecStdin(w, r, id)
	}
	p, err := s.procs.Get(id)
	if err != nil {
		return stdinError(0, err)
	}
	write := func(ctx context.Context, src io.Reader) (int64, error) {
		return p.WriteStdin(ctx, src, s.cfg.BodyTimeout)
	}
	if canSplice(r) && s.writeStdinSpliced(w, r, write, nil) {
		return nil
	}
	body := newProgressReader(w, r)
	n, err := p.WriteStdin(r.Context(), body, s.cfg.BodyTimeout)
	body.Done()
	if err != nil {
		return s.rawWriteError(n, err)
	}
	encode(w, http.StatusOK, stdinReply{Success: true, Written: n})
	return nil
}

// rawWriteError is the reply to a raw write that failed after n bytes:
// the process's side (stdinError, or 409 when it read nothing for the body
// timeout), or the body's (408 when it made no progress for that long,
// else 400).
func (s *Server) rawWriteError(n int64, err error) error {
	switch {
	case errors.Is(err, executor.ErrStdinStalled):
		return withWritten(n, errorf(http.StatusConflict, "the process read none of its stdin for %s", s.cfg.BodyTimeout))
	case isStdinWriteError(err):
		return stdinError(n, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return withWritten(n, errorf(http.StatusRequestTimeout, "request body made no progress for %s", s.cfg.BodyTimeout))
	default:
		return withWritten(n, errorf(http.StatusBadRequest, "reading the request body: %v", err))
	}
}

// handleStdinClose serves POST /close_stdin: the process reads EOF after
// what was written before (a write still in progress included). Closing
// again, or once the process has ended, succeeds.
func (s *Server) handleStdinClose(w http.ResponseWriter, r *http.Request) error {
	id, err := decodeID(w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	p, err := s.procs.Get(id)
	if err == nil {
		err = p.CloseStdin()
	}
	if err != nil {
		return stdinError(0, err)
	}
	encode(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// isStdinWriteError reports whether err is the write's rather than the
// reading of the body's.
func isStdinWriteError(err error) bool {
	return errors.Is(err, executor.ErrStdinClosed) || errors.Is(err, executor.ErrNoStdin) ||
		errors.Is(err, procs.ErrNotRunning) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// stdinError is the reply to a write or a close that failed after n bytes
// were written: 404 for an unknown process, 409 for one whose stdin cannot
// be written (started without it, closed, not running; the message says
// which), with "written" when some of the data went in.
func stdinError(n int64, err error) error {
	var e error
	switch {
	case errors.Is(err, procs.ErrNotFound):
		e = errorf(http.StatusNotFound, "%s", err.Error())
	case errors.Is(err, executor.ErrNoStdin), errors.Is(err, procs.ErrNotRunning), errors.Is(err, executor.ErrStdinClosed):
		e = errorf(http.StatusConflict, "%s", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client left (or the agent is stopping): nobody will read
		// this, but it is no failure of the agent's.
		e = errorf(http.StatusConflict, "the write was abandoned: the request ended before the process read all of the data")
	default:
		return withWritten(n, &httpError{code: http.StatusInternalServerError, msg: "failed to write to stdin", cause: err})
	}
	return withWritten(n, e)
}

// withWritten adds "written": n to the error reply when some data went in.
func withWritten(n int64, err error) error {
	if n == 0 {
		return err
	}
	return withFields(err, map[string]any{"written": n})
}

// errStdinNeedsProcess refuses "stdin": true on /run and /run_streaming:
// nothing could write to a command that has no id.
var errStdinNeedsProcess = errorf(http.StatusBadRequest,
	`"stdin": true is only for /start_process; give the data as "input" instead`)

// checkNoStdin returns errStdinNeedsProcess if c asks for a kept stdin.
func checkNoStdin(c executor.Command) error {
	if c.Stdin {
		return errStdinNeedsProcess
	}
	return nil
}
