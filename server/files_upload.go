package server

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// maxFormFiles bounds the file parts of one POST /files: each is a
// temporary file on disk until the whole form is in.
const maxFormFiles = 10_000

// uploadReply is the reply of PUT /files: the file's path as the client
// named it and its size once written; Entries only for an archive.
type uploadReply struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Entries *int   `json:"entries,omitempty"`
}

// putQuery is the query of PUT /files.
type putQuery struct {
	path    string
	mode    fs.FileMode // 0: the default
	append  bool
	offset  int64 // -1: not given
	extract string
	owner   *files.Owner // nil: the agent
}

func parsePutQuery(r *http.Request) (putQuery, error) {
	q := r.URL.Query()
	p := putQuery{path: q.Get("path"), offset: -1, extract: q.Get("extract")}
	if err := requirePath(p.path); err != nil {
		return p, err
	}
	var err error
	if p.mode, err = queryMode(q.Get("mode")); err != nil {
		return p, err
	}
	if p.append, err = queryBool(q, "append"); err != nil {
		return p, err
	}
	if v := q.Get("offset"); v != "" {
		if p.offset, err = strconv.ParseInt(v, 10, 64); err != nil || p.offset < 0 {
			return p, errorf(http.StatusBadRequest, "offset must be a whole number of bytes, not %q", v)
		}
	}
	switch {
	case p.extract != "" && p.extract != formatTar && p.extract != formatTarGz:
		return p, errorf(http.StatusBadRequest, "extract must be tar or tar.gz, not %q", p.extract)
	case p.extract != "" && (p.append || p.offset >= 0 || p.mode != 0):
		return p, errorf(http.StatusBadRequest, "extract cannot be combined with append, offset or mode")
	case p.append && p.offset >= 0:
		return p, errorf(http.StatusBadRequest, "append and offset cannot be combined")
	case p.extract == "" && strings.HasSuffix(p.path, "/"):
		return p, errorf(http.StatusBadRequest, "path %s ends with a slash: name the file to write", p.path)
	}
	return p, nil
}

// queryMode parses mode=, octal permission bits such as 0644 or 755.
func queryMode(v string) (fs.FileMode, error) {
	if v == "" {
		return 0, nil
	}
	m, err := strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32)
	if err != nil || m > 0o777 {
		return 0, errorf(http.StatusBadRequest, "mode must be octal permission bits such as 0644, not %q", v)
	}
	return fs.FileMode(m), nil
}

// handleFilesPut serves PUT /files?path=P: the raw body becomes the file
// P, atomically (files.WriteAtomic); with append=1 or offset=N it is
// written into P in place (files.WriteAt, not atomic); with extract=tar or
// tar.gz it is an archive unpacked into the directory P (files.Extract).
// 201 when P did not exist, else 200, with {"path","size"} (and
// "entries" for an archive). Everything that can be refused from the
// request's headers is refused before the body is read (see
// newUploadBody and checkSpace).
func (s *Server) handleFilesPut(w http.ResponseWriter, r *http.Request) error {
	q, err := parsePutQuery(r)
	if err != nil {
		return err
	}
	if q.owner, err = s.queryOwner(r); err != nil {
		return err
	}
	body, err := s.newUploadBody(w, r)
	if err != nil {
		return s.refuseEarly(w, r, err)
	}
	if q.extract == "" {
		if err := s.checkSpace(r, q.path); err != nil {
			return s.refuseEarly(w, r, err)
		}
	}
	reply, created, err := s.put(r, q, body)
	body.finish(err)
	if err != nil {
		return body.uploadError(err)
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	encode(w, code, reply)
	return nil
}

// put writes the file, or unpacks the archive, that q asks for.
func (s *Server) put(r *http.Request, q putQuery, body io.Reader) (uploadReply, bool, error) {
	ctx := r.Context()
	opts := files.WriteOptions{Mode: q.mode, Owner: q.owner}
	var res files.Written
	var err error
	switch {
	case q.extract != "":
		x, err := files.Extract(ctx, q.path, body, files.ExtractOptions{Gzip: q.extract == formatTarGz,
			Limit: s.cfg.MaxUpload, MaxEntries: s.cfg.ExtractEntries, Timeout: s.cfg.ExtractTimeout, Owner: q.owner})
		if err != nil {
			return uploadReply{}, false, extractError(r, err, s.cfg.MaxUpload)
		}
		return uploadReply{Path: q.path, Size: x.Size, Entries: &x.Entries}, x.Created, nil
	case q.append:
		res, err = files.WriteAt(ctx, q.path, body, files.AtEnd, opts)
	case q.offset >= 0:
		res, err = files.WriteAt(ctx, q.path, body, q.offset, opts)
	default:
		res, err = files.WriteAtomic(ctx, q.path, body, opts)
	}
	return uploadReply{Path: res.Path, Size: res.Size}, res.Created, err
}

// handleFilesPost serves POST /files?path=DIR with a multipart/form-data
// body (curl -F file=@a -F file=@b, an HTML form): each part with a file
// name becomes the file DIR/<its base name> (never elsewhere: "../x" and
// "/etc/x" are x in DIR), and other parts are skipped. The form is read
// part by part, each part streamed to a temporary file beside its
// destination; only once the whole form is in are they renamed into
// place, so that a form cut short writes nothing. DIR and its parents are
// created if missing. mode= applies to every file. The reply is
// {"files":[{"path","size"}...]}, in the order of the parts.
func (s *Server) handleFilesPost(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	dir := q.Get("path")
	if err := requirePath(dir); err != nil {
		return err
	}
	mode, err := queryMode(q.Get("mode"))
	if err != nil {
		return err
	}
	o, err := s.queryOwner(r)
	if err != nil {
		return err
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return errorf(http.StatusUnsupportedMediaType, "POST /files takes a multipart/form-data body (curl -F file=@name); to send a file as it is, PUT it")
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return errorf(http.StatusConflict, "%s is not a directory", dir)
	}
	body, err := s.newUploadBody(w, r)
	if err != nil {
		return s.refuseEarly(w, r, err)
	}
	if err := s.checkSpace(r, dir+"/x"); err != nil {
		return s.refuseEarly(w, r, err)
	}
	opts := files.WriteOptions{Mode: mode, Owner: o}
	written, err := s.postForm(r, multipart.NewReader(body, params["boundary"]), dir, opts)
	body.finish(err)
	if err != nil {
		return body.uploadError(err)
	}
	encode(w, http.StatusOK, map[string][]uploadReply{"files": written})
	return nil
}

// errNoFiles is the error of a form without a file part.
var errNoFiles = errors.New("no file in the form: send each file as a part with a file name (curl -F file=@name)")

// postForm stages every file part of the form, then commits them all.
func (s *Server) postForm(r *http.Request, mr *multipart.Reader, dir string, opts files.WriteOptions) ([]uploadReply, error) {
	var staged []*files.Staged
	defer func() {
		// Last first: the first file staged made the missing directories,
		// which can go only once the others have left them.
		for _, st := range slices.Backward(staged) {
			st.Discard() // harmless once committed: the file is renamed
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, formError(err)
		}
		if part.FileName() == "" {
			continue // a plain field; NextPart skips what is left of it
		}
		path, err := files.JoinBase(dir, part.FileName())
		if err != nil {
			return nil, err
		}
		if len(staged) == maxFormFiles {
			return nil, errorf(http.StatusBadRequest, "more than %d files in one form", maxFormFiles)
		}
		st, err := files.Stage(r.Context(), path, formPart{part}, opts)
		if err != nil {
			return nil, err
		}
		staged = append(staged, st)
	}
	if len(staged) == 0 {
		return nil, &httpError{code: http.StatusBadRequest, msg: errNoFiles.Error()}
	}
	written := make([]uploadReply, 0, len(staged))
	for _, st := range staged {
		w, err := st.Commit()
		if err != nil {
			return nil, err
		}
		written = append(written, uploadReply{Path: w.Path, Size: w.Size})
	}
	return written, nil
}

// formPart marks the errors of a multipart part that are not the body's
// as a malformed form.
type formPart struct{ p *multipart.Part }

func (f formPart) Read(b []byte) (int, error) {
	n, err := f.p.Read(b)
	if err != nil && err != io.EOF {
		err = formError(err)
	}
	return n, err
}

// formError reports a multipart error that is not the body's own (which
// the reader passes on as it is) as a malformed form.
func formError(err error) error {
	var be *bodyError
	var ee *encodingError
	if errors.As(err, &be) || errors.As(err, &ee) || errors.Is(err, errUploadTooLarge) {
		return err
	}
	return errorf(http.StatusBadRequest, "invalid multipart/form-data body: %v", err)
}
