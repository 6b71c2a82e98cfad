package search

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// GrepRequest is a grep: lines matching Pattern in the files at Path.
// Its JSON is the wire request; zero values mean the defaults noted.
type GrepRequest struct {
	Pattern    string   `json:"pattern"`
	Path       string   `json:"path"`        // a file or a directory; "" is "."; made absolute against the agent's directory
	Fixed      bool     `json:"fixed"`       // Pattern is a literal string, not an RE2 regular expression
	IgnoreCase bool     `json:"ignore_case"` // Unicode simple case folding
	Include    []string `json:"include"`     // globs: if any, only files matching one are searched
	Exclude    []string `json:"exclude"`     // globs: matching files and directories are pruned and counted
	// ExcludeDefaults, if nil, is true: DefaultExcludes are pruned too.
	ExcludeDefaults *bool `json:"exclude_defaults"`
	Context         int   `json:"context"`     // lines before and after each match
	MaxResults      int   `json:"max_results"` // if zero, 200
	// MaxFileBytes skips larger files (counted as too_large). If zero,
	// 10 MiB; at most 256 MiB. A file searched is held in memory whole,
	// so this is also the bound on the memory a search takes for the
	// content of a file.
	MaxFileBytes int64   `json:"max_file_bytes"`
	Hidden       bool    `json:"hidden"`    // search names starting with "."
	Gitignore    *bool   `json:"gitignore"` // if nil, true: honour .gitignore and .ignore
	Timeout      float64 `json:"timeout"`   // seconds; if zero, 30
	Cursor       string  `json:"cursor"`    // from a previous reply: resume after its last match
}

// Match is one matching line.
type Match struct {
	Path   string `json:"path"`   // absolute
	Line   int    `json:"line"`   // 1-based
	Column int    `json:"column"` // 1-based byte offset of the first match in the line
	// Text is the line without its line end; a line over maxText bytes
	// is cut to maxText bytes around the match, and TextTruncated set.
	Text          string   `json:"text"`
	TextTruncated bool     `json:"text_truncated,omitempty"`
	Before        []string `json:"before,omitempty"` // up to Context lines before, nearest last
	After         []string `json:"after,omitempty"`  // up to Context lines after
	// ContextTruncated says that a line of Before or After was over
	// maxText bytes, and was cut to its first maxText ending in "…".
	ContextTruncated bool `json:"context_truncated,omitempty"`
}

// GrepReply is a grep's answer. Matches is nil (and omitted) in the
// streamed form, whose matches went to the callback.
type GrepReply struct {
	Matches           []Match  `json:"matches,omitzero"`
	FilesScanned      int      `json:"files_scanned"` // text files searched by this request
	FilesMatched      int      `json:"files_matched"` // files with a match in Matches
	Skipped           Skipped  `json:"skipped"`
	Truncated         bool     `json:"truncated"`  // stopped before the end: StoppedBy is not "end"
	StoppedBy         string   `json:"stopped_by"` // StoppedEnd, StoppedMaxResults or StoppedTimeout
	Cursor            string   `json:"cursor,omitempty"`
	ExcludedByDefault []string `json:"excluded_by_default"` // what was pruned by default: [] with exclude_defaults false
}

const (
	DefaultMaxResults   = 200 // a grep's max_results if zero
	defaultMaxFileBytes = 10 << 20
	maxMaxFileBytes     = 256 << 20
	defaultTimeout      = 30 * time.Second
	maxContext          = 1000
)

// Grep searches as req says and returns every match in the reply.
func (s *Searcher) Grep(ctx context.Context, req GrepRequest) (*GrepReply, error) {
	matches := []Match{}
	rep, err := s.GrepStream(ctx, req, func(m Match) error {
		matches = append(matches, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Matches = matches
	return rep, nil
}

// GrepStream searches as req says, calling emit with each match in order
// as it is found, and returns the summary (Matches nil). An error emit
// returns ends the search and is returned. A request that cannot run (a
// bad pattern, glob or cursor; a missing path) fails before emit is
// called. When ctx ends, GrepStream returns ctx's error; the request's
// own timeout is not an error but a reply with StoppedBy "timeout".
func (s *Searcher) GrepStream(ctx context.Context, req GrepRequest, emit func(Match) error) (*GrepReply, error) {
	return s.grepStream(ctx, req, emit, engineAuto)
}

// Which engine a grep uses: engineAuto picks, the others are for tests.
const (
	engineAuto = iota
	engineGo
	engineRG
)

func (s *Searcher) grepStream(ctx context.Context, req GrepRequest, emit func(Match) error, engine int) (*GrepReply, error) {
	g, err := newGrep(req, emit)
	if err != nil {
		return nil, err
	}
	root, fi, err := statRoot(req.Path)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	g.ctx = tctx
	// rg searches when it reads the pattern as Go does and the Go engine
	// has no literal to look for first: with one, the Go engine is the
	// faster of the two (BenchmarkGrepLiteral, BenchmarkGrepRegex: the
	// rg engine's first look at each file, for the accounting, and rg's
	// -j1 cost more than Go's memchr-based scan saves), without one
	// Go's regexp is some 30 times slower than rg.
	pat, ok := rgPattern(req)
	useRG := ok && s.RG != "" && g.lit == nil && g.pre == nil
	switch {
	case engine == engineRG && ok && s.RG != "", engine == engineAuto && useRG:
		g.rg = &rgRunner{path: s.RG, pattern: pat, g: g}
	case engine == engineGo:
		g.pre = nil // the Go engine without its prefilter: tests compare
	}
	err = g.run(root, fi)
	var to *timedOut
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &to):
		g.stop(StoppedTimeout, to.at, to.line)
	case err != nil:
		return nil, err
	}
	return g.reply, nil
}

// statRoot makes path absolute and describes it, following a link
// there: the path a request names is what it names.
func statRoot(path string) (string, fs.FileInfo, error) {
	if path == "" {
		path = "."
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", nil, err
	}
	return abs, fi, nil
}

// grep is one grep in progress: its settings, and the reply it builds.
type grep struct {
	ctx        context.Context
	re         *regexp.Regexp // nil when lit is used
	lit        []byte         // the literal of a case-sensitive fixed search
	finder     *literal       // finds lit
	pre        *prefilter     // nil: re is tried on every line
	reFixed    bool           // re is a fixed search with case folded
	context    int
	maxResults int
	maxBytes   int64
	timeout    time.Duration
	walk       walkOptions
	emit       func(Match) error
	reply      *GrepReply
	rg         *rgRunner // nil: the Go engine

	returned int      // matches emitted
	last     []string // where the last one emitted is
	lastLine int
	inFile   []string // the file whose matches are being emitted
	buf      []byte   // reused for each file's content
}

func newGrep(req GrepRequest, emit func(Match) error) (*grep, error) {
	g := &grep{emit: emit, context: req.Context, maxResults: req.MaxResults, maxBytes: req.MaxFileBytes}
	if req.Context < 0 || req.Context > maxContext || req.MaxResults < 0 || req.Timeout < 0 {
		return nil, invalid("context must be 0 to %d; max_results and timeout not negative", maxContext)
	}
	if req.MaxFileBytes < 0 || req.MaxFileBytes > maxMaxFileBytes {
		return nil, invalid("max_file_bytes must be 0 to %d", maxMaxFileBytes)
	}
	if g.maxResults == 0 {
		g.maxResults = DefaultMaxResults
	}
	if g.maxBytes == 0 {
		g.maxBytes = defaultMaxFileBytes
	}
	g.timeout = defaultTimeout
	if req.Timeout > 0 {
		g.timeout = time.Duration(req.Timeout * float64(time.Second))
	}
	g.reFixed = req.Fixed && req.IgnoreCase
	var err error
	if g.re, g.lit, err = compile(req); err != nil {
		return nil, err
	}
	if g.lit != nil {
		g.finder = newLiteral(g.lit)
	} else if !req.Fixed {
		g.pre = newPrefilter(g.re.String()) // with its (?i), if any
	}
	if g.walk, err = walkOpts(req.Hidden, req.Gitignore, req.ExcludeDefaults, req.Exclude, req.Include, req.Cursor); err != nil {
		return nil, err
	}
	g.reply = &GrepReply{StoppedBy: StoppedEnd, ExcludedByDefault: excludedByDefault(req.ExcludeDefaults)}
	return g, nil
}

// compile returns the regular expression of req, or the literal of a
// case-sensitive fixed search.
func compile(req GrepRequest) (*regexp.Regexp, []byte, error) {
	if req.Fixed && !req.IgnoreCase {
		return nil, []byte(req.Pattern), nil
	}
	p := req.Pattern
	if req.Fixed {
		p = regexp.QuoteMeta(p)
	}
	if req.IgnoreCase {
		p = "(?i)" + p
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, nil, &PatternError{Pattern: req.Pattern, Err: err}
	}
	return re, nil, nil
}

func walkOpts(hidden bool, gitignore, excludeDefaults *bool, exclude, include []string, cursor string) (walkOptions, error) {
	o := walkOptions{hidden: hidden, gitignore: gitignore == nil || *gitignore}
	ex := exclude
	if excludeDefaults == nil || *excludeDefaults {
		ex = append(DefaultExcludes(), exclude...)
	}
	var err error
	if o.excludes, err = compileGlobs(ex); err != nil {
		return o, err
	}
	if o.includes, err = compileGlobs(include); err != nil {
		return o, err
	}
	o.after, err = decodeCursor(cursor)
	return o, err
}

func excludedByDefault(on *bool) []string {
	if on != nil && !*on {
		return []string{}
	}
	return DefaultExcludes()
}

// run searches the file or the tree at root.
func (g *grep) run(root string, fi fs.FileInfo) error {
	var err error
	if fi.IsDir() {
		w := &walker{ctx: g.ctx, root: root, opts: g.walk, visit: g.visit}
		err = w.walk()
	} else {
		// A file named by the request is searched whatever the globs,
		// ignore files and hidden names say, as rg does with a file.
		e := entry{kind: entFile, abs: root, rel: []string{filepath.Base(root)}, dirfd: -1, from: -1}
		if a := g.walk.after; a != nil && compareRel(e.rel, a.rel) == 0 {
			e.from = a.line
		} else if a != nil && compareRel(e.rel, a.rel) < 0 {
			return nil
		}
		if !fi.Mode().IsRegular() {
			e.kind = entUnreadable
		}
		err = g.visit(e)
	}
	if err == nil && g.rg != nil {
		err = g.rg.flush()
	}
	var to *timedOut
	if errors.As(err, &to) && g.rg != nil {
		// The walk was ahead of rg: resume at the first file rg had not
		// searched, not at the walk's next entry.
		if at, line, ok := g.rg.pending(); ok {
			to.at, to.line = at, line
		}
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// visit takes the walk's entries in order: the Go engine searches each
// file at once, rg's takes them in batches.
func (g *grep) visit(e entry) error {
	if g.rg != nil {
		return g.rg.add(e)
	}
	if e.kind != entFile {
		g.count(e.kind)
		return nil
	}
	data, ok := g.load(e)
	if !ok {
		return nil
	}
	g.reply.FilesScanned++
	return g.scan(e, data)
}

// count counts an entry that is not searched.
func (g *grep) count(k kind) {
	switch k {
	case entExcluded:
		g.reply.Skipped.Excluded++
	case entUnreadable:
		g.reply.Skipped.Unreadable++
	}
}

// accept emits m, found in the file at rel, unless max_results are
// already out: then the search stops, with a cursor after the last one.
func (g *grep) accept(m Match, rel []string) error {
	if g.returned == g.maxResults {
		g.stop(StoppedMaxResults, nil, 0)
		return errStop
	}
	if err := g.emit(m); err != nil {
		return err
	}
	g.returned++
	if compareRel(g.inFile, rel) != 0 || g.returned == 1 {
		g.reply.FilesMatched++
		g.inFile = rel
	}
	g.last, g.lastLine = rel, m.Line
	return nil
}

// stop ends the reply as truncated, with a cursor after the last match
// emitted, or, with none, after line `line` of `at` (the next entry
// not looked at in full).
func (g *grep) stop(by string, at []string, line int) {
	g.reply.StoppedBy, g.reply.Truncated = by, true
	switch {
	case g.last != nil:
		g.reply.Cursor = encodeCursor(g.last, g.lastLine)
	case at != nil:
		g.reply.Cursor = encodeCursor(at, line)
	}
}
