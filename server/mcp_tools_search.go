package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/mcp"
	"github.com/sandbox-executor/sandbox-executor/search"
)

// The MCP tools grep and find_files: the Searcher of /grep and
// /find_files, with the same arguments. The text a model reads lists what
// was found, then what was not looked at (skipped files, excludes) and,
// when the search stopped early, the cursor that goes on.

// Bounds of the search tools' replies, tighter than the endpoints': the
// reply is read by a model, whole.
const (
	maxToolMatches = 1_000
	maxToolContext = 20
	maxToolFound   = 5_000
)

// walkProps are the arguments grep and find_files share.
func walkProps() map[string]mcp.Prop {
	return map[string]mcp.Prop{
		"path":             {Type: "string", Description: "where to search; the agent's working directory if absent"},
		"exclude":          {Type: "array", StringValues: true, Description: "globs of files and directories to leave out"},
		"exclude_defaults": {Type: "boolean", Description: "also leave out .git, node_modules, __pycache__, .venv, venv, dist, build, target, .next, .cache; true if absent"},
		"hidden":           {Type: "boolean", Description: "also look at names starting with a dot"},
		"gitignore":        {Type: "boolean", Description: "honour .gitignore and .ignore files; true if absent"},
		"timeout":          {Type: "number", Description: "seconds; 30 if absent", Minimum: mcp.Int(0), Maximum: mcp.Int(600)},
		"cursor":           {Type: "string", Description: "from a reply that stopped early: go on after it, with the same other arguments"},
	}
}

func (s *Server) toolGrep() mcp.Tool {
	props := walkProps()
	props["pattern"] = mcp.Prop{Type: "string", Description: "an RE2 regular expression, or a literal string with fixed"}
	props["path"] = mcp.Prop{Type: "string", Description: "a file or a directory; the agent's working directory if absent"}
	props["fixed"] = mcp.Prop{Type: "boolean", Description: "pattern is a literal string"}
	props["ignore_case"] = mcp.Prop{Type: "boolean"}
	props["include"] = mcp.Prop{Type: "array", StringValues: true, Description: "globs: if any, only files matching one are searched"}
	props["context"] = mcp.Prop{Type: "integer", Description: "lines shown before and after each match", Minimum: mcp.Int(0), Maximum: mcp.Int(maxToolContext)}
	props["max_results"] = mcp.Prop{Type: "integer", Description: fmt.Sprintf("the most matches returned; %d if absent", search.DefaultMaxResults), Minimum: mcp.Int(1), Maximum: mcp.Int(maxToolMatches)}
	props["max_file_bytes"] = mcp.Prop{Type: "integer", Description: "larger files are skipped; 10 MiB if absent", Minimum: mcp.Int(1), Maximum: mcp.Int(256 << 20)}
	return mcp.Tool{
		Name: "grep",
		Description: "Search files for lines matching a pattern, recursively, in path order; binary, hidden and " +
			"git-ignored files and the usual build directories are left out (and counted).",
		InputSchema: mcp.Schema{Required: []string{"pattern"}, Properties: props},
		Call:        s.callGrep,
	}
}

// callGrep greps as /grep does. A reply whose text would pass
// maxToolOutput is searched again with max_results as many matches as
// fit: the walk is in a fixed order, so that search stops where the text
// must, and its cursor goes on from there.
func (s *Server) callGrep(ctx context.Context, raw json.RawMessage) mcp.Result {
	req := args[search.GrepRequest](raw)
	asked := req.MaxResults
	for range 3 {
		rep, err := s.search.Grep(ctx, req)
		if err != nil {
			return mcp.Errorf(err.Error())
		}
		cut := contextCut(rep.Matches)
		text, fit := grepText(rep.Matches)
		if fit < len(rep.Matches) {
			req.MaxResults = fit
			continue
		}
		why := ""
		if req.MaxResults != asked && rep.StoppedBy == search.StoppedMaxResults {
			why = fmt.Sprintf("the reply's bound of %d bytes of text", maxToolOutput)
		}
		return done(text+grepSummary(req, rep, cut, why), rep)
	}
	return mcp.Errorf("the files changed while they were searched; search again")
}

// contextCut reports whether the search cut a context line of ms.
func contextCut(ms []search.Match) bool {
	for _, m := range ms {
		if m.ContextTruncated {
			return true
		}
	}
	return false
}

// grepText renders ms as grep -n does, with the context lines around
// each match, in at most maxToolOutput bytes, and returns how many
// matches it holds.
func grepText(ms []search.Match) (string, int) {
	var b strings.Builder
	for i, m := range ms {
		n := b.Len()
		for j, l := range m.Before {
			fmt.Fprintf(&b, "%s-%d-%s\n", m.Path, m.Line-len(m.Before)+j, l)
		}
		fmt.Fprintf(&b, "%s:%d:%s\n", m.Path, m.Line, m.Text)
		for j, l := range m.After {
			fmt.Fprintf(&b, "%s-%d-%s\n", m.Path, m.Line+1+j, l)
		}
		if b.Len() > maxToolOutput && i > 0 {
			return b.String()[:n], i
		}
	}
	if len(ms) == 0 {
		b.WriteString("no matches\n")
	}
	return b.String(), len(ms)
}

// grepSummary says how many matches were found, what was not looked at,
// and how to go on.
// why, if set, is why the search stopped when its stopped_by says
// max_results.
func grepSummary(req search.GrepRequest, rep *search.GrepReply, cutContext bool, why string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d matches in %d files; %d files searched%s]", len(rep.Matches), rep.FilesMatched,
		rep.FilesScanned, skippedText(rep.Skipped))
	if cutContext {
		fmt.Fprintf(&b, "\n[context lines over %d bytes were cut, ending in …: read_file shows them whole]", search.MaxLineBytes)
	}
	if rep.Truncated {
		b.WriteString("\n" + stoppedText("grep", req.MaxResults, search.DefaultMaxResults, rep.StoppedBy, rep.Cursor, why))
	}
	return b.String()
}

// skippedText says what a search did not look at, or nothing.
func skippedText(sk search.Skipped) string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{sk.Binary, "binary"}, {sk.TooLarge, "too large"}, {sk.Unreadable, "unreadable"}, {sk.Excluded, "excluded"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; skipped: " + strings.Join(parts, ", ")
}

// stoppedText says why a search stopped before its end and how to go
// on; why, if set, replaces what stoppedBy says.
func stoppedText(tool string, asked, def int, stoppedBy, cursor, why string) string {
	switch {
	case why != "":
	case stoppedBy == search.StoppedMaxResults:
		if asked == 0 {
			asked = def
		}
		why = fmt.Sprintf("max_results (%d)", asked)
	default:
		why = "its timeout"
	}
	if cursor == "" {
		return fmt.Sprintf("[truncated: stopped at %s]", why)
	}
	return fmt.Sprintf("[truncated: stopped at %s; call %s again with the same arguments and \"cursor\": %q for the rest]", why, tool, cursor)
}

func (s *Server) toolFindFiles() mcp.Tool {
	props := walkProps()
	props["path"] = mcp.Prop{Type: "string", Description: "the directory to search; the agent's working directory if absent"}
	props["glob"] = mcp.Prop{Type: "string", Description: `gitignore-style: without "/" it matches a name at any depth, with one the path relative to path; "**" spans directories; everything if absent`}
	props["type"] = mcp.Prop{Type: "string", Enum: []string{"file", "dir", "any"}, Description: "what to list; file if absent"}
	props["max_results"] = mcp.Prop{Type: "integer", Description: fmt.Sprintf("the most entries returned; %d if absent", search.DefaultMaxEntries), Minimum: mcp.Int(1), Maximum: mcp.Int(maxToolFound)}
	return mcp.Tool{
		Name: "find_files",
		Description: "List the files (or directories) under a directory whose path matches a glob, in path order; " +
			"hidden and git-ignored files and the usual build directories are left out (and counted).",
		InputSchema: mcp.Schema{Properties: props},
		Call:        s.callFindFiles,
	}
}

// callFindFiles lists as /find_files does, searched again with fewer
// max_results when the text would pass maxToolOutput, as callGrep does.
func (s *Server) callFindFiles(ctx context.Context, raw json.RawMessage) mcp.Result {
	req := args[search.FindRequest](raw)
	asked := req.MaxResults
	for range 3 {
		rep, err := s.search.FindFiles(ctx, req)
		if err != nil {
			return mcp.Errorf(err.Error())
		}
		var b bytes.Buffer
		fit := len(rep.Entries)
		for i, e := range rep.Entries {
			n := b.Len()
			if e.Type == "dir" {
				b.WriteString(e.Path + "/\n")
			} else {
				fmt.Fprintf(&b, "%s (%d bytes)\n", e.Path, e.Size)
			}
			if b.Len() > maxToolOutput && i > 0 {
				fit = i
				b.Truncate(n)
				break
			}
		}
		if fit < len(rep.Entries) {
			req.MaxResults = fit
			continue
		}
		if len(rep.Entries) == 0 {
			b.WriteString("nothing found\n")
		}
		fmt.Fprintf(&b, "[%d entries%s]", len(rep.Entries), skippedText(rep.Skipped))
		if rep.Truncated {
			why := ""
			if req.MaxResults != asked && rep.StoppedBy == search.StoppedMaxResults {
				why = fmt.Sprintf("the reply's bound of %d bytes of text", maxToolOutput)
			}
			b.WriteString("\n" + stoppedText("find_files", req.MaxResults, search.DefaultMaxEntries, rep.StoppedBy, rep.Cursor, why))
		}
		return done(b.String(), rep)
	}
	return mcp.Errorf("the files changed while they were listed; list again")
}
