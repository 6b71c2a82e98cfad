package server

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/internal/connlimit"
)

// The streaming file endpoints answer with statuses, unlike the JSON file
// operations' 200-with-error: a download tool or a browser understands a
// 404 and cannot read a JSON error inside a 200.

// refusedLingerMax and refusedLingerTimeout bound how much of the body of
// an upload refused before it was read (see drainRefused) is read and
// discarded after the reply: enough for a client, or a reverse proxy,
// that sends the whole body before it reads anything, as nginx's
// lingering close allows.
const (
	refusedLingerMax     = 64 << 20
	refusedLingerTimeout = 30 * time.Second
)

// refuseEarly replies err, a refusal of an upload decided from its
// headers (413, 415, 507), at once, then reads and discards its body (see
// drainRefused). It returns nil: the reply is sent.
func (s *Server) refuseEarly(w http.ResponseWriter, r *http.Request, err error) error {
	s.writeError(w, r, err)
	drainRefused(w, r)
	return nil
}

// drainRefused reads and discards the body of a request whose reply, a
// refusal with Connection: close, has been written, for at most
// refusedLingerMax bytes or refusedLingerTimeout, whichever comes first,
// so that a client that sends its whole body before reading the reply
// gets the reply rather than a connection reset under its writes. A
// client that sent Expect: 100-continue never sends the body once it has
// the reply, so nothing is waited for then. Past those limits the
// connection is closed all the same.
func drainRefused(w http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") || r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(refusedLingerTimeout))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, refusedLingerMax))
}

// errUploadTooLarge is the error of an upload body that passes
// Config.MaxUpload, on the wire or once decoded.
var errUploadTooLarge = errors.New("upload too large")

// bodyError is a failure to read the request body itself: the client
// left, sent too little, or made no progress for the body timeout.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }

func (e *bodyError) Unwrap() error { return e.err }

// encodingError is a failure to decode a Content-Encoding: gzip body.
type encodingError struct{ err error }

func (e *encodingError) Error() string { return e.err.Error() }

func (e *encodingError) Unwrap() error { return e.err }

// uploadBody is a streamed request body as the files package reads it:
// under the body timeout (progressReader), capped at MaxUpload on the wire
// and once decoded, and decoded from gzip when the request says
// Content-Encoding: gzip. Its errors say where they come from: the body
// (*bodyError, or errUploadTooLarge), the decoding (*encodingError).
type uploadBody struct {
	pr      *progressReader
	max     int64     // 0: no limit
	wire    capReader // the body as it came, over pr
	started bool      // a read was asked for: net/http has sent 100 Continue, if the client waits for it
	gz      *gzip.Reader
	decoded capReader // over gz, when there is one
}

// newUploadBody checks what the request's headers say of its body before
// a byte of it is read: an unsupported Content-Encoding is 415, a
// Content-Length over max 413. Replying then, before reading, is what
// makes a client that sent Expect: 100-continue (curl, for large bodies)
// never send the body at all.
func (s *Server) newUploadBody(w http.ResponseWriter, r *http.Request) (*uploadBody, error) {
	b := &uploadBody{max: s.cfg.MaxUpload}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		b.gz = new(gzip.Reader) // reset on the first read, which reads gzip's header
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, "unsupported Content-Encoding %q: send the body as it is, or gzip", enc)
	}
	if b.max > 0 && r.ContentLength > b.max {
		return nil, b.tooLarge()
	}
	b.pr = newProgressReader(w, r)
	b.wire = capReader{r: bodyReader{b}, max: b.max}
	b.decoded = capReader{r: gzipReader{b}, max: b.max}
	return b, nil
}

func (b *uploadBody) tooLarge() error {
	return &httpError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("upload larger than the limit of %d bytes", b.max),
		extra: map[string]any{"max_bytes": b.max}}
}

// Read reads the decoded body.
func (b *uploadBody) Read(p []byte) (int, error) {
	if b.gz == nil {
		return b.wire.Read(p)
	}
	return b.decoded.Read(p)
}

// bodyReader reads the request body, marking its failures as the body's.
type bodyReader struct{ b *uploadBody }

func (r bodyReader) Read(p []byte) (int, error) {
	r.b.started = true
	n, err := r.b.pr.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err}
	}
	return n, err
}

// gzipReader decodes the capped body, marking its own failures as the
// encoding's; the body's, which gzip passes on as they are, stay so.
type gzipReader struct{ b *uploadBody }

func (r gzipReader) Read(p []byte) (int, error) {
	if !r.b.started {
		if err := r.b.gz.Reset(&r.b.wire); err != nil {
			return 0, decodeError(err)
		}
	}
	n, err := r.b.gz.Read(p)
	if err != nil && err != io.EOF {
		err = decodeError(err)
	}
	return n, err
}

func decodeError(err error) error {
	var be *bodyError
	if errors.As(err, &be) || errors.Is(err, errUploadTooLarge) {
		return err
	}
	return &encodingError{err}
}

// capReader passes on at most max bytes of r (all of them if max is 0).
// Asked for more when r has more, it fails with errUploadTooLarge, then
// and ever after. It never returns bytes together with that error, which
// readers such as io.ReadFull and mime/multipart would then ignore: the
// byte past max is dropped, and the next read fails.
type capReader struct {
	r    io.Reader
	max  int64
	n    int64
	over bool
}

func (c *capReader) Read(p []byte) (int, error) {
	switch {
	case c.over:
		return 0, errUploadTooLarge
	case c.max <= 0:
		n, err := c.r.Read(p)
		c.n += int64(n)
		return n, err
	}
	if room := c.max - c.n + 1; int64(len(p)) > room {
		p = p[:room] // one byte more than allowed tells whether there is more
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n <= c.max {
		return n, err
	}
	c.over = true
	if n--; n == 0 {
		return 0, errUploadTooLarge
	}
	return n, nil
}

// finish ends the reading of the body once the handler is done with it,
// successfully or not. If reading had started and the body is not at its
// end (an upload refused midway, an archive followed by its padding), it
// reads on and discards up to connlimit.LingerMax within connlimit.LingerTimeout: a client or
// a reverse proxy still sending then gets the reply on a connection that
// stays usable, rather than one reset under it. Whatever is left after
// that, the reply closes the connection (progressReader.Done).
func (b *uploadBody) finish(failed error) {
	var be *bodyError
	if b.started && !b.pr.eof && !errors.As(failed, &be) {
		_ = b.pr.rc.SetReadDeadline(time.Now().Add(connlimit.LingerTimeout))
		b.pr.extended = time.Now().Add(time.Hour) // keep that deadline: no read may push it back
		_, _ = io.Copy(io.Discard, io.LimitReader(b.pr, connlimit.LingerMax))
	}
	b.pr.Done()
}

// uploadError turns the error of an upload into the reply's: the body's
// failures first (413, 408, 400), then the decoding's (400), then the
// file system's (see fileError).
func (b *uploadBody) uploadError(err error) error {
	var be *bodyError
	var ee *encodingError
	switch {
	case errors.Is(err, errUploadTooLarge):
		return b.tooLarge()
	case errors.As(err, &be) && errors.Is(err, os.ErrDeadlineExceeded):
		return errorf(http.StatusRequestTimeout, "request body stalled: nothing received for %s", b.pr.idle)
	case errors.As(err, &be):
		return &httpError{code: http.StatusBadRequest, msg: "request body ended early: " + be.Error(), cause: err}
	case errors.As(err, &ee):
		return errorf(http.StatusBadRequest, "invalid gzip request body: %v", ee.err)
	}
	return fileError(err)
}

// fileError turns an error of the file system or of package files into
// the reply of a streaming file endpoint, keeping the system's words:
// 404 for a missing file, 403 for a refusal, 400 for what the client
// asked wrongly, 409 for a file or directory in the way, 507 for a full
// disk. Anything else is the agent's own failure (500).
func fileError(err error) error {
	code := 0
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = http.StatusNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		code = http.StatusForbidden
	case errors.Is(err, files.ErrNotRegular), errors.Is(err, files.ErrBadArchive), errors.Is(err, files.ErrInvalidPath),
		errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EINVAL):
		code = http.StatusBadRequest
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EEXIST), errors.Is(err, files.ErrOffset):
		code = http.StatusConflict
	case errors.Is(err, files.ErrNoSpace):
		code = http.StatusInsufficientStorage
	default:
		return err
	}
	return &httpError{code: code, msg: err.Error(), cause: err}
}

// checkSpace refuses, with 507, an upload whose Content-Length is more
// than the free space of the file system where path goes (of its nearest
// existing parent). A length that is not known, or a body that is
// decoded, is not judged here: a full disk is then found while writing.
func (s *Server) checkSpace(r *http.Request, path string) error {
	if r.ContentLength <= 0 || r.Header.Get("Content-Encoding") != "" {
		return nil
	}
	dir := filepath.Dir(filepath.Clean(path))
	for {
		if _, err := os.Stat(dir); err == nil || dir == filepath.Dir(dir) {
			break
		}
		dir = filepath.Dir(dir)
	}
	free, err := s.freeSpace(dir)
	if err != nil || r.ContentLength <= free {
		return nil // a failed statfs decides nothing: the writes will tell
	}
	return errorf(http.StatusInsufficientStorage, "not enough space on the device for %s: %d bytes sent, %d free",
		path, r.ContentLength, free)
}
