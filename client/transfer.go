package client

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// Files of any size travel through /files, streamed both ways in constant
// memory: Upload and Download, and whole directories as tar archives with
// ExtractArchive and DownloadArchive. Unlike the JSON file operations,
// the agent answers their failures with statuses: an *Error with
// StatusCode 404 (errors.Is fs.ErrNotExist), 403 (fs.ErrPermission), 409
// (a directory in the way), 413 (over the agent's upload limit, in
// Details["max_bytes"]), 507 (the disk is full), 400 (a request or archive
// the agent refuses).

// expectContinueFrom is the body size from which Upload asks the agent
// to approve the request before sending the body (Expect: 100-continue):
// an upload refused from its headers (too large, no space) then costs
// nothing.
const expectContinueFrom = 1 << 20

// UploadOptions are the settings of Upload. The zero value replaces the
// file whole, atomically, with the agent's default mode.
type UploadOptions struct {
	// Mode is the file's permission bits. If zero, the agent's default:
	// 0644 for a new file, the old mode for a replaced one.
	Mode fs.FileMode
	// Append appends the body to the file instead of replacing it. This
	// is not atomic: a reader may see a part of it.
	Append bool
	// WriteAt writes the body into the file from byte Offset, keeping
	// what follows, instead of replacing it; Offset may be at most the
	// file's size (HeadFile tells it), as when resuming an upload. This
	// is not atomic either.
	WriteAt bool
	Offset  int64
	// Size is the body's length, if it is not evident: the length of an
	// *os.File (from its position), a *bytes.Reader, a *bytes.Buffer or
	// a *strings.Reader is measured. If zero and not evident, the body
	// is sent chunked.
	Size int64
	// Gzip compresses the body on the way (Content-Encoding: gzip); the
	// agent writes it decoded.
	Gzip bool
}

// UploadResult is what the agent wrote.
type UploadResult struct {
	Path    string // as the request named it
	Size    int64  // the file's size once written
	Created bool   // there was no file before
}

// Upload writes everything r holds to the file path on the agent, in
// constant memory whatever its size: by default atomically (readers there
// see the old file or the new one, never a part, and a failure leaves the
// old one as it was), creating missing parent directories. If r is an
// io.Closer, it is not closed.
func (c *Client) Upload(ctx context.Context, path string, r io.Reader, opts *UploadOptions) (UploadResult, error) {
	if opts == nil {
		opts = &UploadOptions{}
	}
	q := url.Values{"path": {path}}
	if opts.Mode != 0 {
		q.Set("mode", fmt.Sprintf("%04o", opts.Mode.Perm()))
	}
	switch {
	case opts.Append:
		q.Set("append", "1")
	case opts.WriteAt:
		q.Set("offset", strconv.FormatInt(opts.Offset, 10))
	}
	size := opts.Size
	if size <= 0 {
		size = bodySize(r)
	}
	var hdr http.Header
	if opts.Gzip {
		var stop func() error
		r, stop = gzipBody(r)
		defer stop()
		hdr = http.Header{"Content-Encoding": {"gzip"}}
		size = 0
	}
	var res struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
	code, err := c.send(ctx, http.MethodPut, q, r, size, hdr, &res)
	return UploadResult{Path: res.Path, Size: res.Size, Created: code == http.StatusCreated}, err
}

// bodySize returns the length of what r holds, if evident, else 0.
func bodySize(r io.Reader) int64 {
	switch b := r.(type) {
	case interface{ Len() int }: // *bytes.Reader, *bytes.Buffer, *strings.Reader
		return int64(b.Len())
	case *os.File:
		fi, err := b.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0
		}
		pos, err := b.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0
		}
		return max(fi.Size()-pos, 0)
	}
	return 0
}

// gzipBody returns a reader of r compressed with gzip, and the function
// that stops the compression and waits for it; the compressing goroutine
// is its owner's to stop.
func gzipBody(r io.Reader) (io.Reader, func() error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go compress(done, pw, r)
	return pr, func() error {
		pr.CloseWithError(errors.New("upload over")) // unblocks a compression nobody reads any more
		return <-done
	}
}

// compress writes r gzipped to pw, then closes pw with the result.
//
// compress runs in its own goroutine, started by gzipBody; it ends when r
// is read to its end, or when the pipe's reader is closed.
func compress(done chan<- error, pw *io.PipeWriter, r io.Reader) {
	zw := gzip.NewWriter(pw)
	_, err := io.Copy(zw, r)
	if err == nil {
		err = zw.Close()
	}
	pw.CloseWithError(err)
	done <- err
}

// send sends a request to /files with body (of length size if positive,
// else chunked) and decodes its JSON reply into out. It returns the
// reply's status.
func (c *Client) send(ctx context.Context, method string, q url.Values, body io.Reader, size int64, hdr http.Header, out any) (int, error) {
	req, err := c.filesRequest(ctx, method, q, body)
	if err != nil {
		return 0, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if size > 0 {
		req.ContentLength = size
		if size >= expectContinueFrom {
			req.Header.Set("Expect", "100-continue")
		}
	}
	resp, err := c.do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(out); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, ctxErr
		}
		return 0, fmt.Errorf("%s /files: reading the reply: %w", method, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 512)) // the newline, for the connection's reuse
	return resp.StatusCode, nil
}

// filesRequest builds a request for /files with the token. body may be
// nil.
func (c *Client) filesRequest(ctx context.Context, method string, q url.Values, body io.Reader) (*http.Request, error) {
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/files?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// FileMeta is what the agent says of a file it sends, from the headers of
// GET or HEAD /files.
type FileMeta struct {
	Size        int64     // the whole file's size in bytes
	ETag        string    // changes whenever the content does; for DownloadOptions.IfRange
	ModTime     time.Time // to the second
	ContentType string    // by the name's extension, else sniffed
}

// HeadFile describes the file path on the agent as Download would send
// it; its Size is where to resume an interrupted upload.
func (c *Client) HeadFile(ctx context.Context, path string) (FileMeta, error) {
	req, err := c.filesRequest(ctx, http.MethodHead, url.Values{"path": {path}}, nil)
	if err != nil {
		return FileMeta{}, err
	}
	resp, err := c.do(req)
	if err != nil {
		return FileMeta{}, err
	}
	resp.Body.Close()
	return metaOf(resp, resp.ContentLength), nil
}

func metaOf(resp *http.Response, size int64) FileMeta {
	m := FileMeta{Size: size, ETag: resp.Header.Get("ETag"), ContentType: resp.Header.Get("Content-Type")}
	m.ModTime, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
	return m
}

// DownloadOptions are the settings of Download. The zero value fetches
// the whole file.
type DownloadOptions struct {
	// Offset is the first byte to fetch, and Length how many (if zero, to
	// the end): a range, or the rest of an interrupted download.
	Offset, Length int64
	// IfRange, an ETag of an earlier download, makes a ranged download
	// fetch the whole file instead if the file has changed since: check
	// Downloaded.Offset.
	IfRange string
}

// Downloaded describes a download.
type Downloaded struct {
	FileMeta
	Offset  int64 // the position in the file of the first byte written: 0 if the whole file came
	Written int64 // bytes written to w
}

// Download writes the file path on the agent, or the range opts asks for,
// to w, in constant memory whatever its size. A download cut short is an
// error (io.ErrUnexpectedEOF), never taken for the whole.
func (c *Client) Download(ctx context.Context, path string, w io.Writer, opts *DownloadOptions) (Downloaded, error) {
	if opts == nil {
		opts = &DownloadOptions{}
	}
	req, err := c.filesRequest(ctx, http.MethodGet, url.Values{"path": {path}}, nil)
	if err != nil {
		return Downloaded{}, err
	}
	if opts.Offset > 0 || opts.Length > 0 {
		rng := fmt.Sprintf("bytes=%d-", opts.Offset)
		if opts.Length > 0 {
			rng += strconv.FormatInt(opts.Offset+opts.Length-1, 10)
		}
		req.Header.Set("Range", rng)
		if opts.IfRange != "" {
			req.Header.Set("If-Range", opts.IfRange)
		}
	}
	resp, err := c.do(req)
	if err != nil {
		return Downloaded{}, err
	}
	defer resp.Body.Close()
	d := Downloaded{FileMeta: metaOf(resp, resp.ContentLength)}
	if resp.StatusCode == http.StatusPartialContent {
		var last int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &d.Offset, &last, &d.Size); err != nil {
			return d, fmt.Errorf("GET /files %s: unexpected Content-Range %q", path, resp.Header.Get("Content-Range"))
		}
	}
	d.Written, err = copyBody(w, resp.Body)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return d, ctxErr
		}
		return d, fmt.Errorf("GET /files %s: %w", path, err)
	}
	return d, nil
}

// copyBody copies a download's body to w with a buffer of 256 KiB: io.Copy
// would read a body into an *os.File 32 KiB at a time, and a large file
// would cost eight times the system calls.
func copyBody(w io.Writer, body io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{body}, make([]byte, 256<<10))
}

// DownloadArchive writes the tree under the directory dir on the agent to
// w as a tar archive, gzipped if gz, and returns the bytes written. If the
// agent could not read the whole tree (a file vanished or could not be
// read meanwhile), it cuts the archive and the response, and
// DownloadArchive returns an error: what w holds is then not a whole
// archive (tar rejects it), and the agent's log says why.
func (c *Client) DownloadArchive(ctx context.Context, dir string, w io.Writer, gz bool) (int64, error) {
	format := "tar"
	if gz {
		format = "tar.gz"
	}
	req, err := c.filesRequest(ctx, http.MethodGet, url.Values{"path": {dir}, "format": {format}}, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	switch {
	case err == nil:
		return n, nil
	case ctx.Err() != nil:
		return n, ctx.Err()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("GET /files %s: the archive is incomplete: the agent could not read the whole tree (its log says why): %w", dir, err)
	}
	return n, fmt.Errorf("GET /files %s: %w", dir, err)
}

// Extracted is what ExtractArchive unpacked.
type Extracted struct {
	Path    string // the directory, as the request named it
	Entries int    // files, directories and links unpacked
	Size    int64  // bytes of regular files
	Created bool   // the directory did not exist before
}

// ExtractArchive sends the tar archive r holds (gzipped if gz) to be
// unpacked into the directory dir on the agent, which is created if
// missing. The agent moves the entries into place only once it has read
// and checked the whole archive: a bad or cut one changes nothing.
func (c *Client) ExtractArchive(ctx context.Context, dir string, r io.Reader, gz bool) (Extracted, error) {
	format := "tar"
	if gz {
		format = "tar.gz"
	}
	var res struct {
		Path    string `json:"path"`
		Size    int64  `json:"size"`
		Entries int    `json:"entries"`
	}
	code, err := c.send(ctx, http.MethodPut, url.Values{"path": {dir}, "extract": {format}}, r, bodySize(r), nil, &res)
	return Extracted{Path: res.Path, Entries: res.Entries, Size: res.Size, Created: code == http.StatusCreated}, err
}

// isFileStatus reports whether code is a status with which /files reports
// the file system's refusals, in its words.
func isFileStatus(code int) bool {
	return code == http.StatusNotFound || code == http.StatusForbidden || code == http.StatusConflict
}
