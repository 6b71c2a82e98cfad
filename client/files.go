package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"time"
)

// The file operations go through the agent's JSON endpoints, which hold a
// whole file in one request or reply: the agent reads at most 64 MiB and
// takes request bodies of at most 64 MiB (about 48 MiB of file once in
// base64).
//
// When the file system refuses an operation, the agent answers 200 with
// the operating system's words, and the method returns an *Error with
// StatusCode 200 and those words as Message, such as
// "open /x: no such file or directory". errors.Is(err, fs.ErrNotExist),
// fs.ErrExist and fs.ErrPermission classify it. A malformed request is an
// *Error with status 400.

// FileInfo describes a file or directory on the agent. Symbolic links are
// described by their targets.
type FileInfo struct {
	Name    string // base name
	IsDir   bool
	Size    int64
	ModTime time.Time   // zero if the agent could not inspect the file
	Mode    fs.FileMode // type and permission bits; 0 if the agent's text was not understood
}

// fileReply is the reply of the file operations; Error is set when the
// file system refused.
type fileReply struct {
	Success  *bool  `json:"success"`
	Error    string `json:"error"`
	Content  string `json:"content"`
	IsBase64 bool   `json:"is_base64"`
}

// fileCall calls a file endpoint and turns a refusal into an *Error.
func (c *Client) fileCall(ctx context.Context, path string, body any, out any) error {
	if err := c.call(ctx, http.MethodPost, path, body, out); err != nil {
		return err
	}
	var msg string
	var failed bool
	switch r := out.(type) {
	case *fileReply:
		msg, failed = r.Error, r.Error != "" || (r.Success != nil && !*r.Success)
	case *entryReply:
		msg, failed = r.Error, r.Error != ""
	}
	if !failed {
		return nil
	}
	if msg == "" {
		msg = path + ": the agent reported a failure without saying why"
	}
	return &Error{StatusCode: http.StatusOK, Message: msg}
}

// WriteFile creates or truncates the file at path on the agent and writes
// data to it (mode 0644; parent directories are not created). data is
// sent in base64, so any bytes arrive as they are.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte) error {
	body := struct {
		Path     string `json:"path"`
		Content  string `json:"content"`
		IsBase64 bool   `json:"is_base64"`
	}{path, base64.StdEncoding.EncodeToString(data), true}
	return c.fileCall(ctx, "/write_file", body, &fileReply{})
}

// ReadFile returns the content of the file at path on the agent, byte for
// byte (it travels in base64).
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	body := struct {
		Path     string `json:"path"`
		IsBase64 bool   `json:"is_base64"`
	}{path, true}
	var r fileReply
	if err := c.fileCall(ctx, "/read_file", body, &r); err != nil {
		return nil, err
	}
	if !r.IsBase64 { // an agent that ignores is_base64 sends text
		return []byte(r.Content), nil
	}
	data, err := base64.StdEncoding.DecodeString(r.Content)
	if err != nil {
		return nil, fmt.Errorf("read_file %s: the agent sent invalid base64: %w", path, err)
	}
	return data, nil
}

// pathBody is the body of the operations that take only a path.
type pathBody struct {
	Path string `json:"path"`
}

// DeleteFile removes the file or symbolic link at path; it never removes a
// directory.
func (c *Client) DeleteFile(ctx context.Context, path string) error {
	return c.fileCall(ctx, "/delete_file", pathBody{path}, &fileReply{})
}

// MakeDir creates the directory at path and any missing parents (mode
// 0755), like mkdir -p.
func (c *Client) MakeDir(ctx context.Context, path string) error {
	return c.fileCall(ctx, "/make_dir", pathBody{path}, &fileReply{})
}

// DeleteDir removes the directory at path and everything in it, like
// rm -rf; a path that does not exist is not an error.
func (c *Client) DeleteDir(ctx context.Context, path string) error {
	return c.fileCall(ctx, "/delete_dir", pathBody{path}, &fileReply{})
}

// entryJSON is a FileInfo on the wire.
type entryJSON struct {
	Name    string `json:"name"`
	IsDir   bool   `json:"is_dir"`
	Size    int64  `json:"size"`
	ModTime string `json:"mod_time"`
	Mode    string `json:"mode"`
}

func (e entryJSON) info() FileInfo {
	return FileInfo{Name: e.Name, IsDir: e.IsDir, Size: e.Size, ModTime: parseTime(e.ModTime), Mode: parseMode(e.Mode)}
}

// entryReply is the reply of stat_file and of list_dir with detailed.
type entryReply struct {
	Error   string      `json:"error"`
	Entry   entryJSON   `json:"entry"`
	Entries []entryJSON `json:"entries"`
}

// StatFile describes the file or directory at path.
func (c *Client) StatFile(ctx context.Context, path string) (FileInfo, error) {
	var r entryReply
	if err := c.fileCall(ctx, "/stat_file", pathBody{path}, &r); err != nil {
		return FileInfo{}, err
	}
	return r.Entry.info(), nil
}

// ListDir describes the entries of the directory at path, sorted by name.
func (c *Client) ListDir(ctx context.Context, path string) ([]FileInfo, error) {
	body := struct {
		Path     string `json:"path"`
		Detailed bool   `json:"detailed"`
	}{path, true}
	var r entryReply
	if err := c.fileCall(ctx, "/list_dir", body, &r); err != nil {
		return nil, err
	}
	infos := make([]FileInfo, len(r.Entries))
	for i, e := range r.Entries {
		infos[i] = e.info()
	}
	return infos, nil
}

// parseMode reads fs.FileMode's String form, such as "-rw-r--r--" or
// "drwxr-xr-x", back into a FileMode; it returns 0 for any other text.
func parseMode(s string) fs.FileMode {
	const typeLetters = "dalTLDpSugct?" // fs.FileMode.String's, from ModeDir down
	const perm = "rwxrwxrwx"
	if len(s) < len(perm)+1 {
		return 0
	}
	types, bits := s[:len(s)-len(perm)], s[len(s)-len(perm):]
	var m fs.FileMode
	if types != "-" {
		for _, c := range types {
			i := indexRune(typeLetters, c)
			if i < 0 {
				return 0
			}
			m |= fs.ModeDir >> uint(i)
		}
	}
	for i := range len(perm) {
		switch bits[i] {
		case perm[i]:
			m |= 1 << uint(len(perm)-1-i)
		case '-':
		default:
			return 0
		}
	}
	return m
}

func indexRune(s string, r rune) int {
	for i, c := range s {
		if c == r {
			return i
		}
	}
	return -1
}
