package search

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FindRequest is a find_files: the entries under Path whose path matches
// Glob. Its JSON is the wire request; zero values mean the defaults.
type FindRequest struct {
	Path string `json:"path"` // a directory; "" is "."
	// Glob is gitignore-style: without "/" it matches an entry's name at
	// any depth, with one its path relative to Path; "**" spans
	// directories. If empty, "**": everything.
	Glob            string   `json:"glob"`
	Type            string   `json:"type"`        // "file" (the default), "dir" or "any"
	MaxResults      int      `json:"max_results"` // if zero, 1000
	Hidden          bool     `json:"hidden"`
	Gitignore       *bool    `json:"gitignore"` // if nil, true
	Exclude         []string `json:"exclude"`
	ExcludeDefaults *bool    `json:"exclude_defaults"` // if nil, true
	Timeout         float64  `json:"timeout"`          // seconds; if zero, 30
	Cursor          string   `json:"cursor"`
}

// FoundEntry is one entry find_files returns.
type FoundEntry struct {
	Path    string `json:"path"` // absolute
	Type    string `json:"type"` // "file" or "dir"
	Size    int64  `json:"size"` // 0 for a directory
	ModTime string `json:"mod_time"`
}

// FindReply is find_files' answer.
type FindReply struct {
	Entries           []FoundEntry `json:"entries"`
	Truncated         bool         `json:"truncated"`
	StoppedBy         string       `json:"stopped_by"`
	Cursor            string       `json:"cursor,omitempty"`
	Skipped           Skipped      `json:"skipped"` // binary and too_large stay 0: files are not read
	ExcludedByDefault []string     `json:"excluded_by_default"`
}

// DefaultMaxEntries is a find's max_results if zero.
const DefaultMaxEntries = 1000

// A find cursor's line is cursorReturned: the entry it names was
// returned; 0 means it is still to be looked at (a timeout).
const cursorReturned = 1

// FindFiles lists the files or directories under req.Path that match
// req.Glob, in walk order. Symbolic links are neither followed nor
// listed; special files are listed as files only with type "any".
func (s *Searcher) FindFiles(ctx context.Context, req FindRequest) (*FindReply, error) {
	var entries []FoundEntry
	rep, err := s.FindFilesStream(ctx, req, func(e FoundEntry) error {
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if entries != nil {
		rep.Entries = entries
	}
	return rep, nil
}

// FindFilesStream is FindFiles that hands each entry to emit as the walk
// finds it, in order, rather than holding them: its reply's Entries is
// empty. An error of emit ends the walk and is returned. emit is not
// called once an error is certain: a bad request, or a path that is
// missing or cannot be read, is returned before the first entry.
func (s *Searcher) FindFilesStream(ctx context.Context, req FindRequest, emit func(FoundEntry) error) (*FindReply, error) {
	f, err := newFind(req)
	if err != nil {
		return nil, err
	}
	f.emit = emit
	root, fi, err := statRoot(req.Path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "find", Path: root, Err: syscall.ENOTDIR}
	}
	tctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	w := &walker{ctx: tctx, root: root, opts: f.walk, visit: f.visit}
	err = w.walk()
	var to *timedOut
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &to):
		f.stop(StoppedTimeout, to.at, to.line)
	case err != nil:
		return nil, err
	}
	return f.reply, nil
}

type finder struct {
	glob       []glob
	typ        string
	maxResults int
	timeout    time.Duration
	walk       walkOptions
	reply      *FindReply
	emit       func(FoundEntry) error
	returned   int // entries emitted
	last       []string
	lastModSec int64  // the mod_time of lastModStr (see modTime)
	lastModStr string // "" before the first
}

func newFind(req FindRequest) (*finder, error) {
	f := &finder{typ: req.Type, maxResults: req.MaxResults, timeout: defaultTimeout}
	switch f.typ {
	case "":
		f.typ = "file"
	case "file", "dir", "any":
	default:
		return nil, invalid(`type must be "file", "dir" or "any"`)
	}
	if req.MaxResults < 0 || req.Timeout < 0 {
		return nil, invalid("max_results and timeout must not be negative")
	}
	if f.maxResults == 0 {
		f.maxResults = DefaultMaxEntries
	}
	if req.Timeout > 0 {
		f.timeout = time.Duration(req.Timeout * float64(time.Second))
	}
	g := req.Glob
	if g == "" {
		g = "**"
	}
	var err error
	if f.glob, err = compileGlobs([]string{g}); err != nil {
		return nil, err
	}
	if f.walk, err = walkOpts(req.Hidden, req.Gitignore, req.ExcludeDefaults, req.Exclude, nil, req.Cursor); err != nil {
		return nil, err
	}
	f.reply = &FindReply{Entries: []FoundEntry{}, StoppedBy: StoppedEnd, ExcludedByDefault: excludedByDefault(req.ExcludeDefaults)}
	return f, nil
}

// visit takes the walk's entries in order. Only an entry that is
// returned is stat'ed (for its size and mod_time): the type comes from
// the directory entry, and the glob needs only the name or the path.
func (f *finder) visit(e entry) error {
	switch e.kind {
	case entExcluded:
		f.reply.Skipped.Excluded++
		return nil
	case entLink:
		return nil
	case entUnreadable:
		if e.typ == unix.DT_DIR { // a directory that could not be read
			f.reply.Skipped.Unreadable++
			return nil
		}
	}
	if e.from >= cursorReturned {
		return nil // returned on the page before
	}
	isDir := e.kind == entDir
	typ := "file"
	if isDir {
		typ = "dir"
	}
	if (f.typ == "file" && (isDir || e.kind != entFile)) || (f.typ == "dir" && !isDir) {
		return nil
	}
	if !f.glob[0].match(e.rel, e.name, isDir) {
		return nil
	}
	var st unix.Stat_t
	if err := e.lstat(&st); err != nil {
		return nil // gone since the directory was read
	}
	if f.returned == f.maxResults {
		f.stop(StoppedMaxResults, nil, 0)
		return errStop
	}
	size := st.Size
	if isDir {
		size = 0
	}
	if err := f.emit(FoundEntry{Path: e.abs, Type: typ, Size: size, ModTime: f.modTime(st.Mtim.Sec)}); err != nil {
		return err
	}
	f.returned++
	f.last = e.rel
	return nil
}

// modTime formats a mod_time of sec (Unix seconds). The files of a
// checkout or a build share a few seconds, so the last one is kept.
func (f *finder) modTime(sec int64) string {
	if f.lastModStr == "" || sec != f.lastModSec {
		f.lastModSec, f.lastModStr = sec, time.Unix(sec, 0).UTC().Format(time.RFC3339)
	}
	return f.lastModStr
}

func (f *finder) stop(by string, at []string, line int) {
	f.reply.StoppedBy, f.reply.Truncated = by, true
	switch {
	case f.last != nil:
		f.reply.Cursor = encodeCursor(f.last, cursorReturned)
	case at != nil:
		f.reply.Cursor = encodeCursor(at, line)
	}
}
