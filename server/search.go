package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/search"
)

// The workspace's search endpoints answer with HTTP statuses as /files
// does (400 for a bad request or pattern, 404 for a missing path, 403 for
// one the agent may not read), never the original file endpoints'
// 200-with-error. They run with the agent's own rights, or, with user or
// session, with that user's (searchAs).

// ndjsonType is the media type of a streamed grep.
const ndjsonType = "application/x-ndjson"

// searchError turns an error of package search into its reply: an invalid
// pattern is 400 with the pattern as sent, a bad request 400, and the
// file system's errors as fileError gives them.
func searchError(err error) error {
	var pe *search.PatternError
	switch {
	case errors.As(err, &pe):
		return &httpError{code: http.StatusBadRequest, msg: err.Error(), extra: map[string]any{"pattern": pe.Pattern}}
	case errors.Is(err, search.ErrInvalidRequest):
		return &httpError{code: http.StatusBadRequest, msg: err.Error()}
	}
	return fileError(err)
}

// searchAs runs fn with the searcher of a search made as o (nil: the
// agent, with s.search). As a user, the whole search runs on a thread
// with that user's file-system identity (files.AsOwner): the search runs
// in fn's goroutine alone, so every open, listing and stat of its walk
// is checked by the kernel with the user's rights, and what the user may
// not read is counted in skipped.unreadable as any unreadable file is,
// never searched. It then uses the Go engine: rg, a process of its own,
// would run with the agent's rights.
func (s *Server) searchAs(o *files.Owner, fn func(*search.Searcher) error) error {
	if o == nil {
		return fn(s.search)
	}
	return files.AsOwner(o, func() error { return fn(&search.Searcher{}) })
}

// wantsNDJSON reports whether a grep's client asked for NDJSON, by
// ?stream=1 (or true) or by its Accept header.
func wantsNDJSON(r *http.Request) bool {
	switch r.URL.Query().Get("stream") {
	case "1", "true":
		return true
	}
	return accepts(r, ndjsonType)
}

// handleGrep serves POST /grep: the lines matching a pattern under a
// file or a directory, with what it did not look at (search.GrepReply).
// Streamed (see wantsStream), each match is a line of NDJSON as it is
// found and the last line is the reply without matches; the status is
// decided before the first line, so a bad request is still a 4xx.
func (s *Server) handleGrep(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		search.GrepRequest
		ownerFields
	}
	body, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	o, err := s.owner(body.ownerFields)
	if err != nil {
		return err
	}
	req := body.GrepRequest
	if req.Pattern == "" {
		return errorf(http.StatusBadRequest, "pattern is required")
	}
	if !wantsNDJSON(r) {
		var rep *search.GrepReply
		err := s.searchAs(o, func(se *search.Searcher) (err error) {
			rep, err = se.Grep(r.Context(), req)
			return err
		})
		if err != nil {
			return searchError(err)
		}
		encode(w, http.StatusOK, rep)
		return nil
	}
	nd := newNDJSON(w, s.cfg.StallTimeout)
	defer nd.stall.done()
	var rep *search.GrepReply
	err = s.searchAs(o, func(se *search.Searcher) (err error) {
		rep, err = se.GrepStream(r.Context(), req, func(m search.Match) error { return nd.line(m) })
		return err
	})
	if err != nil {
		if nd.started {
			return err // the client left, or stopped reading: nothing more can be said
		}
		return searchError(err)
	}
	if err := nd.line(rep); err != nil {
		return err
	}
	return nd.bw.Flush()
}

// ndjson writes a stream of JSON lines, sending the status and headers
// with the first one. A client that accepts nothing for the stall
// timeout counts as gone (stallWriter), so a search never waits on it
// for ever.
type ndjson struct {
	w       http.ResponseWriter
	stall   *stallWriter
	bw      *bufio.Writer
	enc     *json.Encoder
	started bool
}

func newNDJSON(w http.ResponseWriter, stall time.Duration) *ndjson {
	sw := newStallWriter(w, stall)
	bw := bufio.NewWriterSize(sw, 32<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &ndjson{w: w, stall: sw, bw: bw, enc: enc}
}

// line writes v as one line. Lines go out as the buffer fills, so a
// large result is never held whole.
func (n *ndjson) line(v any) error {
	if !n.started {
		n.w.Header().Set("Content-Type", ndjsonType)
		n.w.WriteHeader(http.StatusOK)
		n.started = true
	}
	return n.enc.Encode(v)
}

// handleFindFiles serves POST /find_files: the files or directories under
// a directory whose path matches a glob, with what the walk did not look
// at (search.FindReply). The reply is written as the walk finds its
// entries (findWriter), so that a client reads the first while the agent
// looks for the last; its status is decided before the first entry.
func (s *Server) handleFindFiles(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		search.FindRequest
		ownerFields
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	o, err := s.owner(req.ownerFields)
	if err != nil {
		return err
	}
	fw := newFindWriter(w, s.cfg.StallTimeout)
	defer fw.stall.done()
	var rep *search.FindReply
	err = s.searchAs(o, func(se *search.Searcher) (err error) {
		rep, err = se.FindFilesStream(r.Context(), req.FindRequest, fw.entry)
		return err
	})
	if err != nil {
		if fw.started {
			return err // the client left, or stopped reading: nothing more can be said
		}
		return searchError(err)
	}
	return fw.finish(rep)
}
