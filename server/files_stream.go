package server

import (
	"bufio"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// Archive formats of GET /files?format=.
const (
	formatTar   = "tar"
	formatTarGz = "tar.gz"
)

// handleFilesGet serves GET and HEAD /files?path=P: a regular file as it
// is, with http.ServeContent's HTTP semantics (Content-Length,
// Content-Type by extension else sniffed, Last-Modified, Range and
// multipart/byteranges, If-None-Match, If-Modified-Since, If-Match,
// If-Unmodified-Since, If-Range) and an ETag of our own (see files.ETag);
// download=1 adds Content-Disposition: attachment. A directory with
// format=tar or format=tar.gz is streamed as an archive (see
// serveArchive). The body of a file goes out with sendfile(2): the
// response, the access-log recorder and the connection wrapper each pass
// ReadFrom on to the *net.TCPConn.
func (s *Server) handleFilesGet(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	path := q.Get("path")
	if err := requirePath(path); err != nil {
		return err
	}
	format := q.Get("format")
	if format != "" && format != formatTar && format != formatTarGz {
		return errorf(http.StatusBadRequest, "format must be tar or tar.gz, not %q", format)
	}
	download, err := queryBool(q, "download")
	if err != nil {
		return err
	}
	o, err := s.queryOwner(r)
	if err != nil {
		return err
	}
	f, fi, err := files.Open(path, o)
	if err != nil {
		return fileError(err)
	}
	defer f.Close()
	if fi.IsDir() {
		if format == "" {
			return errorf(http.StatusBadRequest, "%s is a directory: download it as an archive with format=tar or format=tar.gz", path)
		}
		return s.serveArchive(w, r, path, format, download, o)
	}
	if format != "" {
		return errorf(http.StatusBadRequest, "format=%s is for directories, and %s is a file", format, path)
	}
	w.Header().Set("ETag", files.ETag(fi))
	if download {
		w.Header().Set("Content-Disposition", attachment(filepath.Base(path)))
	}
	cw := &contentWriter{ResponseWriter: w, stall: newStallWriter(w, s.cfg.StallTimeout)}
	defer cw.stall.done()
	http.ServeContent(cw, r, fi.Name(), fi.ModTime(), f)
	cw.finish()
	return nil
}

// sendPiece is how much of a file goes out in one sendfile(2) call, each
// of which the client must accept within the stall timeout: at least
// 1 MiB a minute by default, which any live client manages.
const sendPiece = 1 << 20

// stallWriter writes to a response under the server's StallTimeout, as
// event streams are written: a client that accepts nothing for that long
// is taken as gone, and the write fails, so that a client that stays
// connected but stops reading cannot hold a download, its file and its
// goroutine for ever. It remembers the first error of writing (the client
// left, or stalled). done clears the deadline, for the next request on
// the connection.
type stallWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	stall time.Duration
	err   error
}

func newStallWriter(w http.ResponseWriter, stall time.Duration) *stallWriter {
	return &stallWriter{w: w, rc: http.NewResponseController(w), stall: stall}
}

// arm starts the stall timeout for the write that follows. A
// ResponseWriter without deadlines (a test's recorder) goes without.
func (sw *stallWriter) arm() { _ = sw.rc.SetWriteDeadline(time.Now().Add(sw.stall)) }

func (sw *stallWriter) done() { _ = sw.rc.SetWriteDeadline(time.Time{}) }

func (sw *stallWriter) Write(p []byte) (int, error) {
	sw.arm()
	n, err := sw.w.Write(p)
	if err != nil && sw.err == nil {
		sw.err = err
	}
	return n, err
}

// attachment returns the Content-Disposition of a download named name.
// A name in printable ASCII is a quoted filename; any other (accents, a
// newline, bytes that are not UTF-8) gets an ASCII filename with "_" for
// each other byte, for old clients, and the exact name in RFC 5987's
// percent-encoded filename* parameter, which RFC 6266 says clients prefer.
func attachment(name string) string {
	fallback := []byte(name)
	exact := true
	for i, c := range fallback {
		if c < 0x20 || c > 0x7e {
			fallback[i], exact = '_', false
		}
	}
	v := mime.FormatMediaType("attachment", map[string]string{"filename": string(fallback)})
	if exact {
		return v
	}
	ext := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	if rest, ok := strings.CutPrefix(ext, "attachment; "); ok {
		v += "; " + rest
	}
	return v
}

// contentWriter is the ResponseWriter that http.ServeContent writes to.
// ServeContent writes its own errors (416 for a range outside the file,
// 412 for a failed If-Match) as plain text; contentWriter makes them
// {"error"} JSON, as every error of the API is. Everything else passes as
// it is, ReadFrom included, so that sendfile(2) is kept.
type contentWriter struct {
	http.ResponseWriter
	stall   *stallWriter // the deadlines of the body's writes
	errCode int          // the error status sent; 0 if none
	errSent bool         // its JSON body has been written
}

func (cw *contentWriter) WriteHeader(code int) {
	if code >= 400 && cw.errCode == 0 {
		cw.errCode = code
		h := cw.Header()
		h.Set("Content-Type", "application/json")
		h.Del("Content-Length")
		h.Del("X-Content-Type-Options")
	}
	cw.ResponseWriter.WriteHeader(code)
}

func (cw *contentWriter) Write(p []byte) (int, error) {
	if cw.errCode == 0 {
		cw.stall.arm()
		return cw.ResponseWriter.Write(p)
	}
	if !cw.errSent {
		cw.errSent = true
		_ = json.NewEncoder(cw.ResponseWriter).Encode(map[string]string{"error": strings.TrimSpace(string(p))})
	}
	return len(p), nil
}

// ReadFrom passes a copy on to the response's ReadFrom: sendfile(2), in
// pieces of sendPiece, each under the stall timeout. ServeContent's copy
// is a LimitedReader of the file, and each piece one of it.
func (cw *contentWriter) ReadFrom(src io.Reader) (int64, error) {
	lr, ok := src.(*io.LimitedReader)
	if cw.errCode != 0 || !ok {
		return io.Copy(struct{ io.Writer }{cw}, src)
	}
	var n int64
	for lr.N > 0 {
		cw.stall.arm()
		m, err := io.Copy(cw.ResponseWriter, &io.LimitedReader{R: lr.R, N: min(lr.N, sendPiece)})
		n, lr.N = n+m, lr.N-m
		if err != nil || m == 0 { // m == 0: the file has shrunk
			return n, err
		}
	}
	return n, nil
}

// Unwrap lets http.ResponseController reach the connection.
func (cw *contentWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// finish writes the body of an error ServeContent sent without one (412).
func (cw *contentWriter) finish() {
	if cw.errCode != 0 && !cw.errSent {
		cw.errSent = true
		msg := strings.ToLower(http.StatusText(cw.errCode))
		if cw.errCode == http.StatusPreconditionFailed {
			msg = "precondition failed: the file does not match If-Match or If-Unmodified-Since"
		}
		_ = json.NewEncoder(cw.ResponseWriter).Encode(map[string]string{"error": msg})
	}
}

// serveArchive streams the directory at path as a tar or tar.gz archive,
// read as o (nil: the agent).
// Its status is 200 before the first byte of the tree is read; a tree
// that then cannot be read (an entry vanishes or cannot be opened, a file
// shrinks) cuts the archive where it fails (see files.WriteArchive) and
// the response is aborted without its final chunk, so that no client
// takes it for whole: curl exits with error 18, Python requests raises
// ChunkedEncodingError, Go's net/http reports an unexpected EOF, tar and
// gzip report a truncated archive. The agent logs why, at warn level.
func (s *Server) serveArchive(w http.ResponseWriter, r *http.Request, path, format string, download bool, o *files.Owner) error {
	gz := format == formatTarGz
	name, ctype := filepath.Base(path)+".tar", "application/x-tar"
	if gz {
		name, ctype = name+".gz", "application/gzip"
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Accept-Ranges", "none")
	if download {
		h.Set("Content-Disposition", attachment(name))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	// Headers are 512 bytes each: gathered, they make chunks of 64 KiB
	// rather than one per entry.
	sink := newStallWriter(w, s.cfg.StallTimeout)
	defer sink.done()
	bw := bufio.NewWriterSize(sink, 64<<10)
	err := files.WriteArchiveAs(r.Context(), bw, path, files.ArchiveOptions{Gzip: gz}, o)
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case err == nil:
		return nil
	case sink.err != nil || r.Context().Err() != nil:
		s.log.Debug().Err(err).Str("path", path).Msg("archive abandoned by the client")
		return nil
	}
	// Everything up to the cut reaches the client, the block that says why
	// included: the abort drops what the response still buffers.
	_ = bw.Flush()
	_ = http.NewResponseController(w).Flush()
	s.log.Warn().Err(err).Str("path", path).Str("format", format).
		Msg("archive cut: the tree could not be read; the response is aborted")
	panic(http.ErrAbortHandler)
}

// queryBool parses the query parameter name as a boolean: absent is
// false; else 1, t, true, 0, f, false in any case, as strconv.ParseBool
// takes them.
func queryBool(q map[string][]string, name string) (bool, error) {
	vs := q[name]
	if len(vs) == 0 {
		return false, nil
	}
	v, err := strconv.ParseBool(vs[0])
	if err != nil {
		return false, errorf(http.StatusBadRequest, "%s must be a boolean such as 1 or true, not %q", name, vs[0])
	}
	return v, nil
}
