// Package edit changes files in ways that cannot clobber: edit_file
// replaces an exact text a known number of times, and apply_patch applies
// a patch in OpenAI Codex's format to every file it names, or to none.
// Both check what they change before writing anything, write atomically
// (a temporary file renamed over the old one, mode and owner kept), and
// refuse when the file changed under them. It knows nothing of HTTP:
// errors are the sentinels and types below, which the HTTP layer maps to
// statuses (ErrInvalid 400, ErrConflict 409, ErrStale 412, a missing file
// fs.ErrNotExist 404, files.ErrTooLarge 413).
package edit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// Sentinel errors.
var (
	ErrInvalid  = errors.New("invalid request")
	ErrConflict = errors.New("conflict")
	ErrStale    = errors.New("the file changed since it was read")
)

// maxFileBytes is the largest file an edit reads: the file is held in
// memory, with its new content.
const maxFileBytes = 64 << 20

// Line is a line of a file: its 1-based number and its text, without
// its line end.
type Line struct {
	Line int    `json:"line"`
	Text string `json:"text"`
}

// NoMatchError is edit_file's error when old is not in the file. Closest
// is the line most like old's first line, if the file has any line.
type NoMatchError struct {
	Path    string
	Closest *Line
}

func (e *NoMatchError) Error() string        { return "old text not found" }
func (e *NoMatchError) Is(target error) bool { return target == ErrConflict }

// CountError is edit_file's error when old occurs another number of
// times than expected (and replace_all is not set). Lines are where each
// occurrence starts.
type CountError struct {
	Path     string
	Expected int
	Lines    []int
}

func (e *CountError) Error() string {
	return fmt.Sprintf("old text found %d times, expected %d: set replace_all, or add context to old", len(e.Lines), e.Expected)
}
func (e *CountError) Is(target error) bool { return target == ErrConflict }

// EditRequest is an edit_file. Its JSON is the wire request.
type EditRequest struct {
	Path          string `json:"path"`
	Old           string `json:"old"`            // not empty; "\n" in it matches "\r\n" in a CRLF file
	New           string `json:"new"`            // written with the file's own line ends
	ExpectedCount int    `json:"expected_count"` // if zero, 1
	ReplaceAll    bool   `json:"replace_all"`    // replace every occurrence, however many
	// IfMatch, if set, is the ETag the client last saw (as GET /files
	// sends it, quotes included): another ETag now refuses with ErrStale.
	IfMatch string `json:"if_match"`
}

// EditReply is edit_file's answer.
type EditReply struct {
	Success      bool   `json:"success"`
	Replacements int    `json:"replacements"`
	ETag         string `json:"etag"` // the file's new ETag
	Diff         string `json:"diff"` // a unified diff of the change; over 1 MiB, cut (see diffCut)
}

// EditFile applies req as o (nil: the agent): the file is read and
// written with o's rights, and, replaced, keeps its mode; its owner is
// o's, or with a nil o the one it had. The file is replaced atomically: a
// reader sees the old content or the new one, whole. If the file changes
// between the read and the rename, nothing is written and the error
// matches ErrStale.
func EditFile(ctx context.Context, req EditRequest, o *files.Owner) (*EditReply, error) {
	return editFile(ctx, req, o, nil)
}

// editFile is EditFile with a hook run just before the rename (tests
// change the file there).
func editFile(ctx context.Context, req EditRequest, o *files.Owner, beforeCommit func()) (*EditReply, error) {
	if req.Path == "" || req.Old == "" || req.ExpectedCount < 0 {
		return nil, fmt.Errorf("%w: path and old are required, expected_count must not be negative", ErrInvalid)
	}
	path, err := filepath.Abs(req.Path)
	if err != nil {
		return nil, err
	}
	data, tag, err := readFile(path, o)
	if err != nil {
		return nil, err
	}
	if req.IfMatch != "" && req.IfMatch != tag {
		return nil, fmt.Errorf("%w: %s: its ETag is %s, not %s", ErrStale, path, tag, req.IfMatch)
	}
	crlf := isCRLF(data)
	old, repl := withLineEnds(req.Old, crlf), withLineEnds(req.New, crlf)
	at := occurrences(data, old)
	want := max(req.ExpectedCount, 1)
	switch {
	case len(at) == 0:
		return nil, &NoMatchError{Path: path, Closest: closest(data, req.Old)}
	case !req.ReplaceAll && len(at) != want:
		return nil, &CountError{Path: path, Expected: want, Lines: lineNumbers(data, at)}
	}
	out := bytes.ReplaceAll(data, []byte(old), []byte(repl))
	newTag, err := commit(ctx, path, out, tag, o, beforeCommit)
	if err != nil {
		return nil, err
	}
	return &EditReply{Success: true, Replacements: len(at), ETag: newTag, Diff: unifiedDiff(path, path, data, out)}, nil
}

// readFile reads the regular file at path as o, and returns its ETag.
func readFile(path string, o *files.Owner) ([]byte, string, error) {
	f, fi, err := files.Open(path, o)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	data, err := readWhole(f, fi, path)
	if err != nil {
		return nil, "", err
	}
	return data, files.ETag(fi), nil
}

// readWhole reads f, whose stat is fi and path path, whole: not a
// directory, and at most maxFileBytes, before and as it is read.
func readWhole(f io.Reader, fi fs.FileInfo, path string) ([]byte, error) {
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "edit", Path: path, Err: errors.New("is a directory")}
	}
	if fi.Size() > maxFileBytes {
		return nil, fmt.Errorf("%w: %s is over %d bytes", files.ErrTooLarge, path, maxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%w: %s is over %d bytes", files.ErrTooLarge, path, maxFileBytes)
	}
	return data, nil
}

// commit replaces the file at path with data, atomically, unless its
// ETag is no longer tag, and returns the new ETag.
func commit(ctx context.Context, path string, data []byte, tag string, o *files.Owner, beforeCommit func()) (string, error) {
	st, err := files.Stage(ctx, path, bytes.NewReader(data), files.WriteOptions{Owner: o})
	if err != nil {
		return "", err
	}
	if beforeCommit != nil {
		beforeCommit()
	}
	// The last look before the rename: a writer after it and before the
	// rename is the window no rename-based write can close (there is no
	// compare-and-swap rename); it is microseconds wide.
	if fi, err := os.Stat(path); err != nil || files.ETag(fi) != tag {
		st.Discard()
		return "", fmt.Errorf("%w: %s", ErrStale, path)
	}
	if _, err := st.Commit(); err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return files.ETag(fi), nil
}

// isCRLF reports whether data's line ends are "\r\n": its first line
// ends so.
func isCRLF(data []byte) bool {
	i := bytes.IndexByte(data, '\n')
	return i > 0 && data[i-1] == '\r'
}

// withLineEnds writes s's line ends as "\r\n" if crlf, else as "\n".
func withLineEnds(s string, crlf bool) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if crlf {
		s = strings.ReplaceAll(s, "\n", "\r\n")
	}
	return s
}

// occurrences returns where old occurs in data, without overlaps, as
// bytes.ReplaceAll replaces them.
func occurrences(data []byte, old string) []int {
	var at []int
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(old))
		if i < 0 {
			return at
		}
		at = append(at, off+i)
		off += i + len(old)
	}
}

// lineNumbers returns the 1-based line of each offset (ascending) of data.
func lineNumbers(data []byte, at []int) []int {
	lines := make([]int, len(at))
	n, prev := 1, 0
	for i, off := range at {
		n += bytes.Count(data[prev:off], []byte{'\n'})
		lines[i], prev = n, off
	}
	return lines
}
