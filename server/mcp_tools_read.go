package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/mcp"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// Bounds of read_file: lines by default, and bytes of text at most.
const (
	defaultReadLines = 2_000
	maxReadText      = 100_000
)

func (s *Server) toolReadFile() mcp.Tool {
	return mcp.Tool{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file, or a range of its lines (at most %d lines or %d bytes at once; "+
			"the reply says where to go on).", defaultReadLines, maxReadText),
		InputSchema: mcp.Schema{Required: []string{"path"}, Properties: map[string]mcp.Prop{
			"path":   {Type: "string"},
			"offset": {Type: "integer", Description: "the first line returned, 1-based; 1 if absent", Minimum: mcp.Int(1)},
			"limit":  {Type: "integer", Description: fmt.Sprintf("how many lines; %d if absent", defaultReadLines), Minimum: mcp.Int(1)},
		}},
		Call: s.callReadFile,
	}
}

// callReadFile reads as /read_file does (files.Scan: regular files only,
// in bounded memory), keeping only the lines asked for.
func (s *Server) callReadFile(ctx context.Context, raw json.RawMessage) mcp.Result {
	a := args[struct {
		Path          string
		Offset, Limit int
	}](raw)
	c, err := files.Scan(ctx, a.Path, nil)
	if err != nil {
		if errors.Is(err, files.ErrTooLarge) {
			return mcp.Errorf(err.Error() + "; read it in line ranges is not possible past " +
				strconv.Itoa(files.MaxRead) + " bytes: download it with GET /files?path=" + a.Path)
		}
		return mcp.Errorf(err.Error())
	}
	defer c.Close()
	if !c.UTF8() {
		return mcp.Errorf(a.Path + " is not UTF-8 text; download it with GET /files?path=" + a.Path)
	}
	win := lineWindow{first: max(a.Offset, 1), lines: a.Limit, line: 1}
	if win.lines <= 0 {
		win.lines = defaultReadLines
	}
	if err := c.Copy(ctx, &win); err != nil && !errors.Is(err, errWindowFull) {
		return mcp.Errorf(err.Error())
	}
	out := map[string]any{"path": a.Path, "content": string(win.out), "start_line": win.first, "truncated": win.cut}
	text := string(win.out)
	if win.more {
		out["next_offset"] = win.next
		why := "the line limit"
		if win.cut {
			why = fmt.Sprintf("%d bytes", maxReadText)
		}
		text += fmt.Sprintf("\n[stopped at %s: read on with offset %d]", why, win.next)
	} else {
		out["total_lines"] = win.total()
		if win.first > win.total() && win.first > 1 {
			text = fmt.Sprintf("[the file has %d lines: offset %d is past its end]", win.total(), win.first)
		}
	}
	return done(text, out)
}

// errWindowFull stops Copy once a lineWindow has what it needs.
var errWindowFull = errors.New("window full")

// lineWindow keeps lines [first, first+lines) of what is written to it,
// in at most maxReadText bytes, cut at a line's end.
type lineWindow struct {
	first, lines int
	line         int    // the line the next byte belongs to, 1-based
	lineStart    int    // where line starts in out, if it is kept
	out          []byte // the lines kept
	more         bool   // lines follow what was kept
	next         int    // the first line not kept, if more
	cut          bool   // stopped by the byte bound, not the line count
	partial      bool   // the last byte written was not a newline
}

// total returns how many lines were written, a last one without its
// newline included.
func (w *lineWindow) total() int {
	if w.partial {
		return w.line
	}
	return w.line - 1
}

func (w *lineWindow) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.line >= w.first+w.lines {
			w.more, w.next = true, w.line
			return 0, errWindowFull
		}
		seg := p
		i := bytes.IndexByte(p, '\n')
		if i >= 0 {
			seg = p[:i+1]
		}
		if w.line >= w.first {
			if len(w.out)+len(seg) > maxReadText {
				return 0, w.full(seg)
			}
			w.out = append(w.out, seg...)
		}
		p = p[len(seg):]
		w.partial = i < 0
		if i >= 0 {
			w.line++
			w.lineStart = len(w.out)
		}
	}
	return n, nil
}

// full ends the window at the byte bound: after the last whole line, or,
// if not even the first line fits, within it, at a character boundary.
func (w *lineWindow) full(seg []byte) error {
	w.more, w.cut, w.next = true, true, w.line
	if w.line > w.first {
		w.out = w.out[:w.lineStart]
		return errWindowFull
	}
	part := seg[:maxReadText-len(w.out)]
	for len(part) > 0 && !utf8.Valid(part) {
		part = part[:len(part)-1]
	}
	w.out = append(w.out, part...)
	w.next = w.line + 1
	return errWindowFull
}

func (s *Server) toolProcessLogs() mcp.Tool {
	return mcp.Tool{
		Name: "process_logs",
		Description: "The retained output of a background process, stdout and stderr interleaved, " +
			"from the line after cursor since (0 or absent: from the start). The reply's cursor resumes.",
		InputSchema: mcp.Schema{Required: []string{"process_id"}, Properties: map[string]mcp.Prop{
			"process_id":       {Type: "string"},
			"since":            {Type: "integer", Description: "a cursor from an earlier reply", Minimum: mcp.Int(0)},
			"max_output_bytes": {Type: "integer", Description: fmt.Sprintf("the most output to return; %d if absent", defaultToolOutput), Minimum: mcp.Int(1), Maximum: mcp.Int(maxToolOutput)},
		}},
		Call: s.callProcessLogs,
	}
}

func (s *Server) callProcessLogs(ctx context.Context, raw json.RawMessage) mcp.Result {
	a := args[struct {
		ProcessID string `json:"process_id"`
		Since     uint64
		MaxOutput int `json:"max_output_bytes"`
	}](raw)
	limit := a.MaxOutput
	if limit <= 0 {
		limit = defaultToolOutput
	}
	p, err := s.procs.Get(a.ProcessID)
	if err != nil {
		return mcp.Errorf(err.Error())
	}
	sub := p.Subscribe(a.Since)
	defer sub.Close()
	var out strings.Builder
	var missed uint64
	cursor, truncated := a.Since, false
	buf := make([]procs.Line, 0, logBatch)
	for !truncated {
		lines, m, _ := sub.Read(buf[:0])
		missed += m
		if len(lines) == 0 {
			break
		}
		for _, l := range lines {
			if out.Len()+len(l.Data)+1 > limit {
				truncated = true
				break
			}
			out.Write(l.Data)
			out.WriteByte('\n')
			cursor = l.Seq
		}
	}
	info := p.Info()
	text := out.String()
	if missed > 0 {
		text = fmt.Sprintf("[%d earlier lines were dropped from the buffer]\n", missed) + text
	}
	if truncated {
		text += fmt.Sprintf("[output truncated at %d bytes; read on with process_logs {\"process_id\": %q, \"since\": %d}]", limit, a.ProcessID, cursor)
	}
	res := map[string]any{"process_id": a.ProcessID, "output": out.String(), "cursor": cursor,
		"truncated": truncated, "missed": missed, "status": info.Status}
	if info.ExitCode != nil {
		res["exit_code"] = *info.ExitCode
	}
	return done(text, res)
}
