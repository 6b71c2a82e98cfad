// Package search answers the workspace's search requests: grep (lines
// matching a pattern) and find_files (paths matching a glob), over a walk
// that says what it did not look at. It knows nothing of HTTP: a request
// is a struct, a reply is a struct whose JSON is the wire reply, and
// errors are the sentinels below.
//
// The walk is depth-first, each directory's entries sorted by the bytes
// of their names (as rg --sort path). Symbolic links are never followed
// (the path a request names is, when it is one). Excludes (the defaults
// and the request's) are applied as the walk goes, so that an excluded
// directory is never entered and caps count only what was asked for;
// each pruned file or directory counts once in skipped.excluded. Files
// that .gitignore or .ignore hide, and hidden files, are left out without
// being counted. Ignore files are read from the searched directory down,
// with or without a .git directory; no global or parent ignore files.
package search

import (
	"errors"
	"fmt"
	"os/exec"
)

// Sentinel errors. The HTTP layer maps ErrInvalidPattern and
// ErrInvalidRequest to 400; a missing path is an error matching
// fs.ErrNotExist (404), a path the agent may not read one matching
// fs.ErrPermission.
var (
	ErrInvalidPattern = errors.New("invalid pattern")
	ErrInvalidRequest = errors.New("invalid request")
)

// PatternError is the error of a pattern that does not compile. Its
// message is "invalid pattern: <why>"; Pattern is the pattern as sent.
type PatternError struct {
	Pattern string
	Err     error
}

func (e *PatternError) Error() string        { return "invalid pattern: " + e.Err.Error() }
func (e *PatternError) Is(target error) bool { return target == ErrInvalidPattern }
func (e *PatternError) Unwrap() error        { return e.Err }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// DefaultExcludes are the names pruned below the searched path unless a
// request sets exclude_defaults to false. Every reply lists them.
var defaultExcludes = [...]string{".git", "node_modules", "__pycache__", ".venv", "venv", "dist", "build", "target", ".next", ".cache"}

// DefaultExcludes returns the names pruned by default, in a new slice.
func DefaultExcludes() []string { return append([]string(nil), defaultExcludes[:]...) }

// Searcher runs searches. The zero value searches with Go's regexp and
// its own walk.
type Searcher struct {
	// RG is the path of ripgrep's rg. If empty, every grep uses the Go
	// engine; if set, a grep whose pattern rg reads exactly as Go does
	// (see rgPattern) has its files searched by rg, with the same reply.
	RG string
}

// New returns a Searcher that uses rg at rgPath ("" for none).
func New(rgPath string) *Searcher { return &Searcher{RG: rgPath} }

// LookRG returns the path of rg on PATH, or "" if there is none.
func LookRG() string {
	p, err := exec.LookPath("rg")
	if err != nil {
		return ""
	}
	return p
}

// Skipped counts what a search did not look at, and why.
type Skipped struct {
	Binary     int `json:"binary"`     // a NUL in the first 8 KiB
	TooLarge   int `json:"too_large"`  // over max_file_bytes
	Unreadable int `json:"unreadable"` // could not be opened or read, or not a regular file (a pipe, a socket, a device)
	Excluded   int `json:"excluded"`   // pruned by the default or the request's excludes, once per file or directory
}

// How a search ended (stopped_by).
const (
	StoppedEnd        = "end"
	StoppedMaxResults = "max_results"
	StoppedTimeout    = "timeout"
)
