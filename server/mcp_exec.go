package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/mcp"
)

// ExecFuncs are what the exec and exec_poll tools stand on: /run with
// yield_ms, and /poll_process (see Server.ExecFuncs, which the agent
// wires as Deps.Exec). Without them both tools are absent, never stubs.
type ExecFuncs struct {
	// Start starts c and waits until it ends or c.Yield passes. A command
	// that cannot start is an error, whose text the model reads.
	Start func(ctx context.Context, c ExecStart) (ExecState, error)
	// Poll writes p.Input to the process's stdin (and closes it if
	// p.CloseStdin), waits until it ends or p.Yield passes, and returns
	// its output after p.Cursor.
	Poll func(ctx context.Context, p ExecPoll) (ExecState, error)
}

// ExecStart is a command for ExecFuncs.Start.
type ExecStart struct {
	Cmd, Cwd, Session string
	Env               map[string]string
	Timeout           time.Duration // 0: none
	Yield             time.Duration
	// MaxOutput is the tool's max_output_bytes (0: its default): a
	// command that ended within Yield and whose output fits is forgotten
	// at once, as /run's; one whose output is cut stays readable by
	// process_logs.
	MaxOutput int
}

// ExecPoll is a poll for ExecFuncs.Poll.
type ExecPoll struct {
	ProcessID string
	Cursor    *int64 // nil: after the last poll's
	Input     string
	// CloseStdin closes the process's stdin after Input: it reads EOF.
	CloseStdin bool
	Yield      time.Duration
}

// ExecState is a command's state after Start or Poll.
type ExecState struct {
	ProcessID string // a background process: process_logs reads it
	Running   bool
	ExitCode  *int   // nil while running
	Output    []byte // stdout and stderr since the cursor asked for, in order
	Cursor    int64  // where the next poll goes on
	// Missed counts output bytes lost before they could be read.
	Missed int64
}

const defaultYield = 10 * time.Second

var execOutputSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"status":{"type":"string","enum":["running","exited"]},"exit_code":{"type":"integer"},` +
	`"output":{"type":"string"},"truncated":{"type":"boolean"},"process_id":{"type":"string"},"cursor":{"type":"integer"}},` +
	`"required":["status","output","truncated","process_id","cursor"]}`)

func yieldProp() mcp.Prop {
	return mcp.Prop{Type: "integer", Description: "how long to wait for the command to end before replying with what it printed so far, in ms; 10000 if absent",
		Minimum: mcp.Int(0), Maximum: mcp.Int(600_000)}
}

func outputProp() mcp.Prop {
	return mcp.Prop{Type: "integer", Description: fmt.Sprintf("the most output to return, its head and its tail; %d if absent", defaultToolOutput),
		Minimum: mcp.Int(1), Maximum: mcp.Int(maxToolOutput)}
}

// execTools returns exec and exec_poll over fns.
func execTools(fns ExecFuncs) []mcp.Tool {
	exec := mcp.Tool{
		Name: "exec",
		Description: "Run a shell command. If it ends within yield_ms, the reply has its exit code and output; " +
			"otherwise it goes on in the background and the reply has a process_id and cursor for exec_poll. " +
			"Its stdin stays open: a command that waits for input (a prompt, a REPL, cat) gets it with exec_poll's input, " +
			"and EOF with exec_poll's close_stdin.",
		InputSchema: mcp.Schema{Required: []string{"cmd"}, Properties: map[string]mcp.Prop{
			"cmd":              {Type: "string", Description: "the command, run by /bin/sh -c"},
			"cwd":              {Type: "string"},
			"env":              {Type: "object", StringValues: true},
			"session":          {Type: "string", Description: "a session whose cd and export the command starts from and keeps"},
			"timeout":          {Type: "integer", Description: "seconds after which the command is killed", Minimum: mcp.Int(1)},
			"yield_ms":         yieldProp(),
			"max_output_bytes": outputProp(),
		}},
		OutputSchema: execOutputSchema,
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct {
				Cmd, Cwd, Session string
				Env               map[string]string
				Timeout           int
				YieldMS           *int `json:"yield_ms"`
				MaxOutput         int  `json:"max_output_bytes"`
			}](raw)
			st, err := fns.Start(ctx, ExecStart{Cmd: a.Cmd, Cwd: a.Cwd, Session: a.Session, Env: a.Env,
				Timeout: time.Duration(a.Timeout) * time.Second, Yield: toolYield(a.YieldMS), MaxOutput: a.MaxOutput})
			if err != nil {
				return mcp.Errorf("the command could not start: " + err.Error())
			}
			return execResult(st, a.MaxOutput)
		},
	}
	poll := mcp.Tool{
		Name:        "exec_poll",
		Description: "Wait for a command exec left running, optionally writing input to its stdin first (then closing it with close_stdin); returns its output after cursor.",
		InputSchema: mcp.Schema{Required: []string{"process_id"}, Properties: map[string]mcp.Prop{
			"process_id":  {Type: "string"},
			"cursor":      {Type: "integer", Description: "from the last reply; absent: after the last poll", Minimum: mcp.Int(0)},
			"input":       {Type: "string", Description: "written to the command's stdin first; end a line with \\n"},
			"close_stdin": {Type: "boolean", Description: "close the command's stdin after input: it reads end of file"},
			"yield_ms":    yieldProp(),
		}},
		OutputSchema: execOutputSchema,
		Call: func(ctx context.Context, raw json.RawMessage) mcp.Result {
			a := args[struct {
				ProcessID  string `json:"process_id"`
				Cursor     *int64
				Input      string
				CloseStdin bool `json:"close_stdin"`
				YieldMS    *int `json:"yield_ms"`
			}](raw)
			st, err := fns.Poll(ctx, ExecPoll{ProcessID: a.ProcessID, Cursor: a.Cursor, Input: a.Input,
				CloseStdin: a.CloseStdin, Yield: toolYield(a.YieldMS)})
			if err != nil {
				return mcp.Errorf(err.Error())
			}
			return execResult(st, 0)
		},
	}
	return []mcp.Tool{exec, poll}
}

func toolYield(ms *int) time.Duration {
	if ms == nil {
		return defaultYield
	}
	return time.Duration(*ms) * time.Millisecond
}

// execResult renders st, its output cut to its head and tail within
// limit bytes (defaultToolOutput if 0). A command that exited non-zero is
// an error result.
func execResult(st ExecState, limit int) mcp.Result {
	if limit <= 0 {
		limit = defaultToolOutput
	}
	out, omitted := clipHeadTail(st.Output, limit)
	res := map[string]any{"status": "exited", "output": string(out), "truncated": omitted > 0 || st.Missed > 0,
		"process_id": st.ProcessID, "cursor": st.Cursor}
	text := string(out)
	if st.Missed > 0 {
		text = fmt.Sprintf("[%d bytes of earlier output were lost]\n", st.Missed) + text
	}
	isError := false
	if st.Running {
		res["status"] = "running"
		text += fmt.Sprintf("\n[still running: exec_poll {\"process_id\": %q, \"cursor\": %d}]", st.ProcessID, st.Cursor)
	} else if st.ExitCode != nil {
		res["exit_code"] = *st.ExitCode
		isError = *st.ExitCode != 0
		text += "\n[exit code " + strconv.Itoa(*st.ExitCode) + "]"
	}
	if omitted > 0 { // last, where a reader of the text looks for it
		text += fmt.Sprintf("\n[output truncated: %d bytes omitted; read it with process_logs {\"process_id\": %q}]", omitted, st.ProcessID)
	}
	return mcp.Result{Content: []mcp.Content{mcp.Text(text)}, Structured: res, IsError: isError}
}

// clipHeadTail returns b, or its head and tail in at most limit bytes and
// how many bytes were left out between them. The cuts fall between
// characters, never inside one.
func clipHeadTail(b []byte, limit int) ([]byte, int) {
	if len(b) <= limit {
		return b, 0
	}
	h, t := limit/2, len(b)-(limit-limit/2)
	for h > 0 && !utf8.RuneStart(b[h]) {
		h--
	}
	for t < len(b) && !utf8.RuneStart(b[t]) {
		t++
	}
	head, tail := b[:h], b[t:]
	omitted := len(b) - len(head) - len(tail)
	out := make([]byte, 0, len(head)+len(tail)+1)
	out = append(append(append(out, head...), '\n'), tail...)
	return out, omitted
}
