package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/mcp"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/readiness"
)

// The MCP tools. Each calls what its HTTP endpoint calls (files, procs,
// edit, search, contexts, readiness), for the agent's own user. exec and
// exec_poll (mcp_exec.go) stand on /run's yield_ms and /poll_process
// through Server.exec (mcp_exec_run.go); edit_file and apply_patch are in
// mcp_tools_edit.go, grep and find_files in mcp_tools_search.go, run_code
// in mcp_tools_code.go.

// mcpToolNames returns the names of every tool, in the order offered:
// what -mcp-tools may name.
func mcpToolNames() []string {
	return []string{"exec", "exec_poll", "read_file", "write_file", "edit_file", "apply_patch", "list_dir", "grep", "find_files",
		"process_list", "process_kill", "process_logs", "run_code", "preview_url", "wait_for_port"}
}

func (s *Server) mcpTools() []mcp.Tool {
	var tools []mcp.Tool
	if s.exec != nil {
		tools = execTools(*s.exec)
	}
	tools = append(tools, s.toolReadFile(), s.toolWriteFile(), s.toolEditFile(), s.toolApplyPatch(), s.toolListDir(),
		s.toolGrep(), s.toolFindFiles(), s.toolProcessList(), s.toolProcessKill(), s.toolProcessLogs())
	if s.contexts != nil {
		tools = append(tools, s.toolRunCode())
	}
	return append(tools, s.toolPreviewURL(), s.toolWaitForPort())
}

// Output bounds of the tools, in bytes of text and in entries.
const (
	defaultToolOutput = 30_000
	maxToolOutput     = 1 << 20
	maxDirEntries     = 1_000
	maxDirDepth       = 5
)

// args decodes a call's arguments, which passed the tool's schema.
func args[T any](raw json.RawMessage) T {
	var v T
	_ = json.Unmarshal(raw, &v) // the schema checked every type
	return v
}

// done returns the Result of a tool whose work went as asked: text for
// the model, v as structuredContent.
func done(text string, v any) mcp.Result {
	return mcp.Result{Content: []mcp.Content{mcp.Text(text)}, Structured: v}
}

func (s *Server) toolWriteFile() mcp.Tool {
	return mcp.Tool{
		Name:        "write_file",
		Description: "Create or overwrite a text file with content (mode 0644; the parent directory must exist).",
		InputSchema: mcp.Schema{Required: []string{"path", "content"}, Properties: map[string]mcp.Prop{
			"path":    {Type: "string", Description: "the file's path"},
			"content": {Type: "string", Description: "the whole new content"},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct{ Path, Content string }](raw)
			if err := files.Write(ctx, a.Path, []byte(a.Content), nil); err != nil {
				return mcp.Errorf(err.Error())
			}
			return done(fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path),
				map[string]any{"path": a.Path, "bytes": len(a.Content)})
		},
	}
}

func (s *Server) toolListDir() mcp.Tool {
	return mcp.Tool{
		Name:        "list_dir",
		Description: fmt.Sprintf("List a directory; with depth > 1, its subdirectories too (at most %d entries).", maxDirEntries),
		InputSchema: mcp.Schema{Required: []string{"path"}, Properties: map[string]mcp.Prop{
			"path":  {Type: "string", Description: "the directory"},
			"depth": {Type: "integer", Description: "how many levels to list; 1 (the default) lists only path", Minimum: mcp.Int(1), Maximum: mcp.Int(maxDirDepth)},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct {
				Path  string
				Depth int
			}](raw)
			w := dirWalk{ctx: ctx, depth: max(a.Depth, 1)}
			if err := w.list(a.Path, "", 1); err != nil {
				return mcp.Errorf(err.Error())
			}
			text := strings.Join(w.lines, "\n")
			if w.truncated {
				text += fmt.Sprintf("\n[listing truncated at %d entries: list a subdirectory for the rest]", maxDirEntries)
			}
			return done(text, map[string]any{"path": a.Path, "entries": w.entries, "truncated": w.truncated})
		},
	}
}

// dirWalk lists a tree to a depth, in at most maxDirEntries entries.
type dirWalk struct {
	ctx       context.Context
	depth     int
	entries   []map[string]any
	lines     []string
	truncated bool
}

func (w *dirWalk) list(dir, rel string, level int) error {
	es, err := files.List(w.ctx, dir, nil)
	if err != nil {
		return err
	}
	for _, e := range es {
		if len(w.entries) == maxDirEntries {
			w.truncated = true
			return nil
		}
		name := rel + e.Name
		w.entries = append(w.entries, map[string]any{"name": name, "is_dir": e.IsDir, "size": e.Size})
		if e.IsDir {
			w.lines = append(w.lines, name+"/")
			if level < w.depth {
				// A subdirectory that cannot be read is listed, not descended.
				_ = w.list(dir+"/"+e.Name, name+"/", level+1)
			}
			continue
		}
		w.lines = append(w.lines, fmt.Sprintf("%s (%d bytes)", name, e.Size))
	}
	return nil
}

func (s *Server) toolProcessList() mcp.Tool {
	return mcp.Tool{
		Name:        "process_list",
		Description: "List the background processes: id, pid, status, command, exit code.",
		InputSchema: mcp.Schema{},
		Call: func(ctx context.Context, _ json.RawMessage) mcp.Result {
			infos := s.procs.List()
			items := make([]processItem, len(infos))
			var b strings.Builder
			for i, p := range infos {
				items[i] = processItem{ID: p.ID, PID: p.PID, Status: p.Status, Command: p.Command,
					ExitCode: p.ExitCode, StartedAt: formatTime(p.StartedAt), CompletedAt: formatTime(p.CompletedAt)}
				fmt.Fprintf(&b, "%s\t%s\t%s\n", p.ID, p.Status, p.Command)
			}
			if len(items) == 0 {
				b.WriteString("no processes")
			}
			return done(strings.TrimRight(b.String(), "\n"), map[string]any{"processes": items})
		},
	}
}

func (s *Server) toolProcessKill() mcp.Tool {
	return mcp.Tool{
		Name:        "process_kill",
		Description: "Send a signal (SIGKILL unless named) to a background process's whole process group.",
		InputSchema: mcp.Schema{Required: []string{"process_id"}, Properties: map[string]mcp.Prop{
			"process_id": {Type: "string"},
			"signal":     {Type: "string", Description: "a name (SIGTERM, TERM) or a number; SIGKILL if absent"},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct {
				ProcessID string `json:"process_id"`
				Signal    string
			}](raw)
			sig, err := procs.ParseSignal(a.Signal)
			if err != nil {
				return mcp.Errorf(err.Error())
			}
			ctx, cancel := context.WithTimeout(ctx, killWait)
			defer cancel()
			exited, err := s.procs.Kill(ctx, a.ProcessID, sig)
			if err != nil {
				return mcp.Errorf(err.Error())
			}
			msg := procs.SignalName(sig) + " sent to the process group"
			if exited {
				msg = "the command had already exited; " + msg + " it left"
			} else if sig == syscall.SIGKILL {
				msg = "process killed"
			}
			return done(msg, map[string]any{"process_id": a.ProcessID, "signal": procs.SignalName(sig), "already_exited": exited})
		},
	}
}

func (s *Server) toolPreviewURL() mcp.Tool {
	return mcp.Tool{
		Name: "preview_url",
		Description: "The path, on the agent's API address, that proxies to an HTTP app listening on port in the sandbox. Requests to it need the agent's token. " +
			"For a port exposed with /expose_port, also url: the host-name form (PORT-host), for apps that use absolute paths.",
		InputSchema: mcp.Schema{Required: []string{"port"}, Properties: map[string]mcp.Prop{
			"port": {Type: "integer", Minimum: mcp.Int(1), Maximum: mcp.Int(65535)},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct{ Port int }](raw)
			p := s.cfg.BasePath + "/proxy/" + strconv.Itoa(a.Port) + "/"
			out := map[string]any{"path": p}
			text := p + " (send the agent's token with each request)"
			if x := s.exposed.lookup(a.Port); x != nil {
				if u := hostFormURL(ctx, a.Port); u != "" {
					out["url"], out["public"] = u, x.public
					text += "; also " + u
					if x.public {
						text += " (exposed as public: no token needed)"
					} else {
						text += " (needs the token)"
					}
				}
			}
			return done(text, out)
		},
	}
}

func (s *Server) toolWaitForPort() mcp.Tool {
	return mcp.Tool{
		Name: "wait_for_port",
		Description: "Wait until something listens on port in the sandbox (tcp: a connection is accepted; http: a request " +
			"gets a status in range), the process process_id exits, or timeout passes. Not ready is an error result saying why.",
		InputSchema: mcp.Schema{Properties: map[string]mcp.Prop{
			"port":       {Type: "integer", Description: "required unless process_id names a process started with its own ready probe", Minimum: mcp.Int(1), Maximum: mcp.Int(65535)},
			"mode":       {Type: "string", Enum: []string{"tcp", "http"}, Description: "tcp if absent"},
			"path":       {Type: "string", Description: `for http: the path requested; "/" if absent`},
			"status":     {Type: "string", Description: `for http: the status or range that means ready, such as "200-399" (the default) or "204"`},
			"timeout":    {Type: "number", Description: "seconds; 30 if absent", Minimum: mcp.Int(0), Maximum: mcp.Int(maxReadyTimeout)},
			"process_id": {Type: "string", Description: "a background process: stop waiting if it exits"},
		}},
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct {
				readyRequest
				ProcessID string `json:"process_id"`
			}](raw)
			res, port, p, err := s.waitForPort(ctx, a.readyRequest, a.ProcessID)
			if err != nil {
				return mcp.Errorf(err.Error())
			}
			if res.Reason == readiness.ReasonGone {
				return mcp.Errorf("the client left before the port was ready")
			}
			rep := waitReplyOf(res, port, p)
			if rep.Ready {
				return done(fmt.Sprintf("port %d is ready (on %s, after %d ms)", port, rep.Address, *rep.WaitedMS), rep)
			}
			text := "not ready: " + rep.Reason
			if rep.ExitCode != nil {
				text += fmt.Sprintf(" (exit code %d; read its output with process_logs)", *rep.ExitCode)
			}
			if rep.LastError != "" {
				text += "; last error: " + rep.LastError
			}
			return mcp.Result{Content: []mcp.Content{mcp.Text(text)}, Structured: rep, IsError: true}
		},
	}
}
