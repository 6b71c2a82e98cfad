package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// File and directory operations answer 200 even when the file system
// refuses, with the operating system's wording in "error": every client
// retries 5xx replies, and the Python SDK classifies failures by those
// words ("no such file or directory", "file exists", "not empty"). Only a
// malformed request is a 400.

// pathRequest is the body of the operations that take only a path (and
// who they act for).
type pathRequest struct {
	Path string `json:"path"`
	ownerFields
}

func (p pathRequest) target() pathRequest { return p }

func requirePath(path string) error {
	if path == "" {
		return errorf(http.StatusBadRequest, "path is required")
	}
	return nil
}

// decodeFileOp decodes the body of a JSON file operation, whose request
// type embeds pathRequest, and returns it with the account the operation
// acts for: 400 without a path, and the owner's errors as fileOwner
// gives them.
func decodeFileOp[T interface{ target() pathRequest }](s *Server, w http.ResponseWriter, r *http.Request) (T, *files.Owner, error) {
	req, err := decode[T](w, r, s.cfg.MaxBody)
	if err != nil {
		return req, nil, err
	}
	t := req.target()
	if err := requirePath(t.Path); err != nil {
		return req, nil, err
	}
	o, err := s.owner(t.ownerFields)
	return req, o, err
}

// successReply is the reply of write_file, delete_file, make_dir and
// delete_dir. The CLI needs success:true to believe it worked.
type successReply struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
}

// replyDone writes the reply of an operation that ended with err.
func replyDone(w http.ResponseWriter, err error) {
	if err != nil {
		encode(w, http.StatusOK, successReply{Error: err.Error()})
		return
	}
	encode(w, http.StatusOK, successReply{Success: true})
}

// replyFailed writes the reply of a read, list or stat the file system
// refused: an error and nothing else.
func replyFailed(w http.ResponseWriter, err error) {
	encode(w, http.StatusOK, map[string]string{"error": err.Error()})
}

// entryJSON is a files.Entry on the wire, as the CLI's DirEntry reads it.
type entryJSON struct {
	Name  string `json:"name"`
	IsDir bool   `json:"is_dir"`
	Size  int64  `json:"size"`
	// ModTime is RFC 3339 in UTC; absent if the entry could not be
	// inspected.
	ModTime string `json:"mod_time,omitempty"`
	Mode    string `json:"mode"` // fs.FileMode.String(), e.g. "-rw-r--r--"
}

func toEntryJSON(e files.Entry) entryJSON {
	j := entryJSON{Name: e.Name, IsDir: e.IsDir, Size: e.Size, Mode: e.Mode.String()}
	if !e.ModTime.IsZero() {
		j.ModTime = e.ModTime.UTC().Format(time.RFC3339Nano)
	}
	return j
}

// handleFileWrite serves POST /write_file: it creates or truncates a
// regular file (mode 0644, parents not created) and writes content to it.
// With is_base64, content is standard base64 and is decoded first. A
// missing or null content writes an empty file: the platform's CLI leaves
// content out for one.
func (s *Server) handleFileWrite(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		pathRequest
		Content  string `json:"content"`
		IsBase64 bool   `json:"is_base64"`
	}
	req, o, err := decodeFileOp[request](s, w, r)
	if err != nil {
		return err
	}
	data := []byte(req.Content)
	if req.IsBase64 {
		if data, err = base64.StdEncoding.DecodeString(req.Content); err != nil {
			return errorf(http.StatusBadRequest, "invalid base64 content: %v", err)
		}
	}
	replyDone(w, files.Write(r.Context(), req.Path, data, o))
	return nil
}

// handleFileRead serves POST /read_file: it replies with a file's content,
// "" for an empty file. The content is base64, with is_base64:true, when
// the client asks for it or when the file is not valid UTF-8: JSON would
// otherwise replace the invalid bytes with U+FFFD.
//
// The reply is streamed from the file (see writeContent), so a read costs
// about 128 KiB of memory whatever the file's size and however many run
// at once. Only regular files are read: a device, a named pipe or a
// socket is refused before a byte is read.
func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		pathRequest
		IsBase64 bool `json:"is_base64"`
		Offset   *int `json:"offset"` // 1-based line; with limit, the reply adds total_lines and truncated
		Limit    *int `json:"limit"`  // lines
	}
	req, o, err := decodeFileOp[request](s, w, r)
	if err != nil {
		return err
	}
	lines := req.Offset != nil || req.Limit != nil
	if req.Offset != nil && *req.Offset < 1 || req.Limit != nil && *req.Limit < 0 {
		return errorf(http.StatusBadRequest, "offset must be at least 1 and limit not negative")
	}
	c, err := files.Scan(r.Context(), req.Path, o)
	if errors.Is(err, files.ErrTooLarge) {
		// A refusal, not a fault: 200 like the others, with the way out.
		err = fmt.Errorf("%w; download it with GET /files?path=%s", err,
			strings.ReplaceAll(url.QueryEscape(req.Path), "%2F", "/"))
	}
	if err != nil {
		replyFailed(w, err)
		return nil
	}
	defer c.Close()
	if lines {
		return replyLines(w, r, c, req.Offset, req.Limit, req.IsBase64)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if err := writeContent(r.Context(), w, c, req.IsBase64 || !c.UTF8()); err != nil {
		// The reply has started: ending it cleanly would pass a cut file
		// off as whole. Breaking the connection is the only way to say so.
		panic(http.ErrAbortHandler)
	}
	return nil
}

// linesReply is read_file's reply with offset or limit: the lines
// selected, line ends kept, and what the original reply does not say.
type linesReply struct {
	Content    string `json:"content"`
	IsBase64   bool   `json:"is_base64,omitempty"`
	TotalLines int    `json:"total_lines"`
	Truncated  bool   `json:"truncated"` // more lines follow the ones returned
}

// replyLines writes read_file's reply of the lines of c that offset
// (1-based; nil: 1) and limit (nil: all the rest) select. They are held
// in memory, at most the 64 MiB read_file reads.
func replyLines(w http.ResponseWriter, r *http.Request, c *files.Content, offset, limit *int, asBase64 bool) error {
	off, lim := 1, -1
	if offset != nil {
		off = *offset
	}
	if limit != nil {
		lim = *limit
	}
	lw, err := c.Lines(r.Context(), off, lim)
	if err != nil {
		replyFailed(w, err)
		return nil
	}
	rep := linesReply{Content: string(lw.Data), TotalLines: lw.Total, Truncated: lw.More}
	if asBase64 || !utf8.Valid(lw.Data) {
		rep.Content, rep.IsBase64 = base64.StdEncoding.EncodeToString(lw.Data), true
	}
	encode(w, http.StatusOK, rep)
	return nil
}

// writeContent writes the reply of read_file for c, in bounded memory, as
// encoding/json would encode {"content":...} or
// {"content":...,"is_base64":true}: the same bytes but for '<', '>' and
// '&', written as they are, and backspace and form feed, written \u0008
// and \u000c rather than \b and \f (the same JSON values). If the file
// has changed since it was scanned, the reply is still valid JSON.
func writeContent(ctx context.Context, w io.Writer, c *files.Content, asBase64 bool) error {
	if !asBase64 {
		if _, err := io.WriteString(w, `{"content":`); err != nil {
			return err
		}
		js := sse.NewJSONString(w)
		if err := c.Copy(ctx, js); err != nil {
			return err
		}
		if err := js.Close(); err != nil {
			return err
		}
		_, err := io.WriteString(w, "}\n")
		return err
	}
	if _, err := io.WriteString(w, `{"content":"`); err != nil {
		return err
	}
	// base64's encoder writes 1 KiB at a time; the buffer gathers them.
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	if err := c.Copy(ctx, enc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if _, err := bw.WriteString(`","is_base64":true}` + "\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// handleFileDelete serves POST /delete_file: it removes a file or a
// symbolic link, never a directory.
func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) error {
	req, o, err := decodeFileOp[pathRequest](s, w, r)
	if err != nil {
		return err
	}
	replyDone(w, files.Delete(req.Path, o))
	return nil
}

// handleFileStat serves POST /stat_file: it describes a file or directory,
// following symbolic links, as {"entry": {...}}.
func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) error {
	req, o, err := decodeFileOp[pathRequest](s, w, r)
	if err != nil {
		return err
	}
	e, err := files.Stat(req.Path, o)
	if err != nil {
		replyFailed(w, err)
		return nil
	}
	encode(w, http.StatusOK, map[string]entryJSON{"entry": toEntryJSON(e)})
	return nil
}

// handleDirMake serves POST /make_dir: mkdir -p with mode 0755. The
// recursive field some clients send is accepted and ignored: the
// operation is always recursive.
func (s *Server) handleDirMake(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		pathRequest
		Recursive bool `json:"recursive"` // ignored; declared so a non-boolean is a 400
	}
	req, o, err := decodeFileOp[request](s, w, r)
	if err != nil {
		return err
	}
	replyDone(w, files.MakeDir(req.Path, o))
	return nil
}

// handleDirDelete serves POST /delete_dir: rm -rf of a directory. A
// missing path is success; a path that is not a directory is refused.
// "/" and a path that ends in "." or ".." are a 400: "x/.." would empty
// x's parent.
func (s *Server) handleDirDelete(w http.ResponseWriter, r *http.Request) error {
	req, o, err := decodeFileOp[pathRequest](s, w, r)
	if err != nil {
		return err
	}
	err = files.DeleteDir(r.Context(), req.Path, o)
	if errors.Is(err, files.ErrInvalidPath) {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	replyDone(w, err)
	return nil
}

// handleDirList serves POST /list_dir: the names in a directory, sorted,
// or with detailed:true the same entries stat_file gives. An empty
// directory gives "entries":[], never null or absent.
func (s *Server) handleDirList(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		pathRequest
		Detailed bool `json:"detailed"`
	}
	req, o, err := decodeFileOp[request](s, w, r)
	if err != nil {
		return err
	}
	entries, err := files.List(r.Context(), req.Path, o)
	if err != nil {
		replyFailed(w, err)
		return nil
	}
	if req.Detailed {
		detailed := make([]entryJSON, 0, len(entries))
		for _, e := range entries {
			detailed = append(detailed, toEntryJSON(e))
		}
		encode(w, http.StatusOK, map[string][]entryJSON{"entries": detailed})
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	encode(w, http.StatusOK, map[string][]string{"entries": names})
	return nil
}
