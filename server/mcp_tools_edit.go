package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/edit"
	"github.com/sandbox-executor/sandbox-executor/mcp"
)

// The MCP tools edit_file and apply_patch: package edit, as /edit_file and
// /apply_patch call it, for the agent's own user. A conflict (old text
// not found or found too often, a hunk that does not apply) is an error
// result that says where to look, with the fields /edit_file's 409 has.

func (s *Server) toolEditFile() mcp.Tool {
	return mcp.Tool{
		Name: "edit_file",
		Description: "Replace the exact text old with new in a file, written atomically. old must occur exactly once " +
			"(add surrounding lines to make it unique) unless replace_all is set or expected_count says how often. " +
			"The reply is a unified diff of the change.",
		InputSchema: mcp.Schema{Required: []string{"path", "old", "new"}, Properties: map[string]mcp.Prop{
			"path":           {Type: "string", Description: "the file's path"},
			"old":            {Type: "string", Description: "the exact text to replace, not empty; \\n also matches \\r\\n"},
			"new":            {Type: "string", Description: "the text to put in its place"},
			"replace_all":    {Type: "boolean", Description: "replace every occurrence, however many"},
			"expected_count": {Type: "integer", Description: "how many times old must occur; 1 if absent", Minimum: mcp.Int(1)},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			req := args[edit.EditRequest](raw)
			if req.Old == "" {
				return mcp.Errorf("old must not be empty: to create a file, use write_file")
			}
			rep, err := edit.EditFile(ctx, req, nil)
			if err != nil {
				return editResultError(err)
			}
			diff, cut := clipDiff(rep.Diff)
			text := fmt.Sprintf("replaced %d occurrence(s) in %s\n%s", rep.Replacements, req.Path, diff)
			return done(text, map[string]any{"path": req.Path, "replacements": rep.Replacements,
				"etag": rep.ETag, "diff": diff, "diff_truncated": cut})
		},
	}
}

func (s *Server) toolApplyPatch() mcp.Tool {
	return mcp.Tool{
		Name: "apply_patch",
		Description: "Apply a patch in the apply_patch format (*** Begin Patch, *** Add File / *** Update File / " +
			"*** Delete File with @@ hunks, *** Move to, *** End Patch): every hunk is checked first, then all files change or none.",
		InputSchema: mcp.Schema{Required: []string{"patch"}, Properties: map[string]mcp.Prop{
			"patch": {Type: "string", Description: "the whole patch, from *** Begin Patch to *** End Patch"},
			"cwd":   {Type: "string", Description: "the directory relative paths are under; the agent's own if absent"},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			req := args[edit.PatchRequest](raw)
			rep, err := edit.ApplyPatch(ctx, req, nil)
			if err != nil {
				return editResultError(err)
			}
			var b strings.Builder
			for _, f := range rep.Files {
				fmt.Fprintf(&b, "%s %s\n", f.Action, f.Path)
			}
			diff, cut := clipDiff(rep.Diff)
			b.WriteString(diff)
			return done(b.String(), map[string]any{"files": nonNil(rep.Files), "diff": diff, "diff_truncated": cut})
		},
	}
}

// clipDiff bounds a diff to defaultToolOutput bytes, its head and tail,
// saying what was left out: the file itself has the rest.
func clipDiff(diff string) (string, bool) {
	out, omitted := clipHeadTail([]byte(diff), defaultToolOutput)
	if omitted == 0 {
		return diff, false
	}
	return string(out) + fmt.Sprintf("\n[diff truncated: %d bytes omitted; read the file with read_file]\n", omitted), true
}

// editResultError is the error result of an edit or a patch that was
// refused: the reason, then where to look (the closest line, the lines of
// every match, a hunk's nearest lines), also as structuredContent.
func editResultError(err error) mcp.Result {
	var (
		noMatch *edit.NoMatchError
		count   *edit.CountError
		hunk    *edit.HunkError
		file    *edit.FileError
	)
	text := err.Error()
	extra := map[string]any{"error": text}
	switch {
	case errors.As(err, &noMatch):
		text = "old text not found in " + noMatch.Path
		extra["path"] = noMatch.Path
		if noMatch.Closest != nil {
			extra["closest"] = noMatch.Closest
			text += fmt.Sprintf("; the closest line is %d: %s", noMatch.Closest.Line, noMatch.Closest.Text)
		}
		text += ". Read the file and copy old exactly."
	case errors.As(err, &count):
		extra["path"], extra["lines"] = count.Path, count.Lines
		text += " (at lines " + joinInts(count.Lines) + ")"
	case errors.As(err, &hunk):
		extra["file"], extra["hunk"], extra["nearest"] = hunk.File, hunk.Hunk, nonNil(hunk.Nearest)
		for _, l := range hunk.Nearest {
			text += fmt.Sprintf("\n%d: %s", l.Line, l.Text)
		}
		if len(hunk.Nearest) > 0 {
			text = strings.Replace(text, "\n", "\nthe nearest lines of the file:\n", 1)
		}
		text += "\nNothing was changed."
	case errors.As(err, &file):
		extra["file"] = file.File
		text += "\nNothing was changed."
	}
	extra["error"] = text
	return mcp.Result{Content: []mcp.Content{mcp.Text(text)}, Structured: extra, IsError: true}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
