package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What kin-openapi cannot judge, the checker judges here: bodies of bytes
// (a download, an upload), ranges, HEAD replies and 304s, which it skips.

// maxKeptRanges bounds the multipart/byteranges reply a binaryReply keeps
// to check its parts.
const maxKeptRanges = 1 << 20

// rawBodyOperation reports whether op's request body is not JSON: an upload of
// bytes or a multipart form.
func rawBodyOperation(op *openapi3.Operation) bool {
	return op.RequestBody != nil && op.RequestBody.Value != nil && op.RequestBody.Value.Content["application/json"] == nil
}

// checkRawRequest checks that a request whose body is bytes, if the agent
// accepted it, had a content type the operation documents (none means
// "*/*").
func (ex *exchange) checkRawRequest(status int, body *bodyRecorder) {
	if status >= 400 || body.n == 0 {
		return
	}
	ct := ex.req.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if ex.route.Operation.RequestBody.Value.Content.Get(mt) == nil {
		ex.report("the agent answered %d to a body of Content-Type %q, which the document does not list", status, ct)
	}
}

// checkUnvalidated checks the replies kin-openapi lets pass unseen: a 304
// must be documented and empty, and a HEAD reply's status and headers are
// checked against the HEAD operation as if it were a GET's.
func (ex *exchange) checkUnvalidated(in *openapi3filter.RequestValidationInput, cw *checkWriter) {
	if cw.status == http.StatusNotModified {
		if ex.route.Operation.Responses.Status(http.StatusNotModified) == nil {
			ex.report("reply 304, which the document does not list")
		}
		if cw.binary != nil && cw.binary.n > 0 || len(cw.json.buf) > 0 {
			ex.report("reply 304 with a body")
		}
	}
	if ex.req.Method != http.MethodHead {
		return
	}
	get := in.Request.Clone(context.WithoutCancel(in.Request.Context()))
	get.Method = http.MethodGet // the route stays the HEAD operation's
	asGet := *in
	asGet.Request = get
	resp := &openapi3filter.ResponseValidationInput{RequestValidationInput: &asGet, Status: cw.status, Header: cw.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true}}
	if err := openapi3filter.ValidateResponse(in.Request.Context(), resp); err != nil {
		ex.report("HEAD reply %d: %v", cw.status, err)
	}
}

// binaryReply counts the bytes of a reply the document says is bytes,
// keeping only a multipart/byteranges one (up to maxKeptRanges) to check
// its parts.
type binaryReply struct {
	n        int64
	boundary string // of a multipart/byteranges reply; "" otherwise
	kept     []byte
}

// binaryReply returns a binaryReply if the document says the reply with
// this status and header is bytes (a schema of type string with a
// contentMediaType), else nil.
func (ex *exchange) binaryReply(status int, h http.Header) *binaryReply {
	if ex.route == nil {
		return nil
	}
	resp := ex.route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return nil
	}
	ct, params, _ := mime.ParseMediaType(h.Get("Content-Type"))
	mt := resp.Value.Content.Get(ct)
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || mt.Schema.Value.ContentMediaType == "" {
		return nil
	}
	b := &binaryReply{}
	if ct == "multipart/byteranges" {
		b.boundary = params["boundary"]
	}
	return b
}

func (b *binaryReply) write(p []byte) {
	b.n += int64(len(p))
	if b.boundary != "" && len(b.kept) < maxKeptRanges {
		b.kept = append(b.kept, p[:min(len(p), maxKeptRanges-len(b.kept))]...)
	}
}

// check checks the length of what was sent against Content-Length and,
// for a 206, against the ranges it claims.
func (b *binaryReply) check(ex *exchange, cw *checkWriter) {
	if cw.writeErr || ex.req.Method == http.MethodHead {
		return
	}
	if cl := cw.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err != nil || n != b.n {
			ex.report("reply %d: Content-Length %q, but %d bytes were sent", cw.status, cl, b.n)
		}
	}
	if cw.status != http.StatusPartialContent {
		return
	}
	if b.boundary == "" {
		if err := checkRange(cw.header.Get("Content-Range"), b.n); err != nil {
			ex.report("reply 206: %v", err)
		}
		return
	}
	if len(b.kept) < maxKeptRanges {
		if err := checkByteranges(b.kept, b.boundary); err != nil {
			ex.report("reply 206: %v", err)
		}
	}
}

// checkRange checks that a Content-Range of "bytes first-last/size"
// describes n bytes within the file.
func checkRange(cr string, n int64) error {
	var first, last, size int64
	if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &size); err != nil {
		return fmt.Errorf("Content-Range %q is not bytes first-last/size", cr)
	}
	if first < 0 || last < first || last >= size || last-first+1 != n {
		return fmt.Errorf("Content-Range %q, but %d bytes were sent", cr, n)
	}
	return nil
}

// checkByteranges checks every part of a multipart/byteranges body.
func checkByteranges(body []byte, boundary string) error {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	parts := 0
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("multipart/byteranges: %v", err)
		}
		n, err := io.Copy(io.Discard, p)
		if err != nil {
			return fmt.Errorf("multipart/byteranges: %v", err)
		}
		if err := checkRange(textproto.MIMEHeader(p.Header).Get("Content-Range"), n); err != nil {
			return fmt.Errorf("part %d: %v", parts+1, err)
		}
		parts++
	}
	if parts < 2 {
		return fmt.Errorf("multipart/byteranges with %d parts: one range is sent as a plain 206", parts)
	}
	return nil
}

// replyBytes is a fake handler that reads the request and replies with
// status, the headers given as name, value pairs, and body.
func replyBytes(code int, body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// The checker judges what kin-openapi lets pass: byte bodies against
// their lengths and ranges, 304s, HEAD replies, and the content type of
// an upload.
func TestOpenAPICheckBinary(t *testing.T) {
	const (
		file     = "/files?path=/tmp/a"
		etagHdr  = `"1-2-3-4"`
		boundary = "XYZ"
	)
	okHeaders := []string{"Content-Type", "application/octet-stream", "Accept-Ranges", "bytes", "ETag", etagHdr}
	multi := "--XYZ\r\nContent-Range: bytes 0-1/10\r\n\r\nab\r\n--XYZ\r\nContent-Range: bytes 5-7/10\r\n\r\nfgh\r\n--XYZ--\r\n"
	badMulti := strings.Replace(multi, "5-7", "5-8", 1)
	uploaded := `{"path":"/tmp/a","size":1}`
	tests := []struct {
		name, method, path, ctype, body string
		h                               http.HandlerFunc
		want                            string
	}{
		{"valid download", "GET", file, "", "", replyBytes(200, "hello", append(okHeaders, "Content-Length", "5")...), ""},
		{"short of its Content-Length", "GET", file, "", "", replyBytes(200, "hello", append(okHeaders, "Content-Length", "10")...), "Content-Length"},
		{"valid range", "GET", file, "", "", replyBytes(206, "ell", append(okHeaders, "Content-Range", "bytes 1-3/5")...), ""},
		{"range of another length", "GET", file, "", "", replyBytes(206, "ell", append(okHeaders, "Content-Range", "bytes 1-4/5")...), "Content-Range"},
		{"valid byteranges", "GET", file, "", "", replyBytes(206, multi, "Content-Type", "multipart/byteranges; boundary="+boundary, "Accept-Ranges", "bytes"), ""},
		{"byteranges part of another length", "GET", file, "", "", replyBytes(206, badMulti, "Content-Type", "multipart/byteranges; boundary="+boundary), "part 2"},
		{"304 where none is documented", "GET", "/list_processes", "", "", replyBytes(304, ""), "304"},
		{"valid 304", "GET", file, "", "", replyBytes(304, "", "ETag", etagHdr), ""},
		{"valid HEAD", "HEAD", file, "", "", replyBytes(200, "", append(okHeaders, "Content-Length", "5")...), ""},
		{"HEAD without Accept-Ranges", "HEAD", file, "", "", replyBytes(200, "", "ETag", etagHdr), "Accept-Ranges"},
		{"HEAD status not documented", "HEAD", file, "", "", replyBytes(http.StatusTeapot, ""), "status is not supported"},
		{"valid upload", "PUT", file, "application/octet-stream", "x", replyBytes(201, uploaded, "Content-Type", "application/json"), ""},
		{"valid form", "POST", file, "multipart/form-data; boundary=b", "--b--\r\n", replyBytes(200, `{"files":[]}`, "Content-Type", "application/json"), ""},
		{"form of another type accepted", "POST", file, "text/plain", "x", replyBytes(200, `{"files":[]}`, "Content-Type", "application/json"), "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDocChecker(t, "", testSecret, tt.h)
			ts := httptest.NewServer(c)
			defer ts.Close()
			req, err := http.NewRequestWithContext(t.Context(), tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+testSecret)
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ts.Close()
			errs := c.errors()
			if tt.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs, "the checker missed it")
			assert.Contains(t, strings.Join(errs, "\n"), tt.want)
		})
	}
}
