package server

import (
	"encoding/base64"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// File and directory operations answer 200 even when the file system
// refuses, with the operating system's wording in "error": every client
// retries 5xx replies, and the Python SDK classifies failures by those
// words ("no such file or directory", "file exists", "not empty"). Only a
// malformed request is a 400.

// pathRequest is the body of the operations that take only a path.
type pathRequest struct {
	Path string `json:"path"`
}

func requirePath(path string) error {
	if path == "" {
		return errorf(http.StatusBadRequest, "path is required")
	}
	return nil
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

// handleFileWrite serves POST /write_file: it creates or truncates a file
// (mode 0644, parents not created) and writes content to it. With
// is_base64, content is standard base64 and is decoded first.
func (s *Server) handleFileWrite(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path     string  `json:"path"`
		Content  *string `json:"content"` // nil when absent: "" is a valid content
		IsBase64 bool    `json:"is_base64"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	if req.Content == nil {
		return errorf(http.StatusBadRequest, "content is required")
	}
	data := []byte(*req.Content)
	if req.IsBase64 {
		if data, err = base64.StdEncoding.DecodeString(*req.Content); err != nil {
			return errorf(http.StatusBadRequest, "invalid base64 content: %v", err)
		}
	}
	replyDone(w, files.Write(req.Path, data))
	return nil
}

// handleFileRead serves POST /read_file: it replies with a file's content,
// "" for an empty file. The content is base64, with is_base64:true, when
// the client asks for it or when the file is not valid UTF-8: JSON would
// otherwise replace the invalid bytes with U+FFFD.
func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path     string `json:"path"`
		IsBase64 bool   `json:"is_base64"`
	}
	type reply struct {
		Content  string `json:"content"`
		IsBase64 bool   `json:"is_base64,omitempty"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	data, err := files.Read(req.Path)
	if err != nil { // files.ErrTooLarge included: it is a refusal, not a fault
		replyFailed(w, err)
		return nil
	}
	if req.IsBase64 || !utf8.Valid(data) {
		encode(w, http.StatusOK, reply{Content: base64.StdEncoding.EncodeToString(data), IsBase64: true})
		return nil
	}
	encode(w, http.StatusOK, reply{Content: string(data)})
	return nil
}

// handleFileDelete serves POST /delete_file: it removes a file or a
// symbolic link, never a directory.
func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[pathRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	replyDone(w, files.Delete(req.Path))
	return nil
}

// handleFileStat serves POST /stat_file: it describes a file or directory,
// following symbolic links, as {"entry": {...}}.
func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[pathRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	e, err := files.Stat(req.Path)
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
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"` // ignored; declared so a non-boolean is a 400
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	replyDone(w, files.MakeDir(req.Path))
	return nil
}

// handleDirDelete serves POST /delete_dir: rm -rf of a directory. A
// missing path is success; a path that is not a directory is refused.
func (s *Server) handleDirDelete(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[pathRequest](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	replyDone(w, files.DeleteDir(req.Path))
	return nil
}

// handleDirList serves POST /list_dir: the names in a directory, sorted,
// or with detailed:true the same entries stat_file gives. An empty
// directory gives "entries":[], never null or absent.
func (s *Server) handleDirList(w http.ResponseWriter, r *http.Request) error {
	type request struct {
		Path     string `json:"path"`
		Detailed bool   `json:"detailed"`
	}
	req, err := decode[request](w, r, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	if err := requirePath(req.Path); err != nil {
		return err
	}
	entries, err := files.List(req.Path)
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
