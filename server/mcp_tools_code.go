package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/mcp"
)

// The MCP tool run_code: a call of /run_code (package contexts), read to
// its complete and rendered as text, each PNG or JPEG it showed an MCP
// image.

// Bounds of run_code: the default timeout (a model's client gives up on a
// request long before a cell that never ends would), and the images one
// reply carries.
const (
	defaultCodeTimeout = 60 * time.Second
	maxCodeTimeout     = 3600
	maxToolImages      = 8
	maxToolImageBytes  = 8 << 20 // of base64, all images together
)

func (s *Server) toolRunCode() mcp.Tool {
	return mcp.Tool{
		Name: "run_code",
		Description: "Run code in an interpreter: in a context (whose variables and imports last between calls; " +
			"create one with POST /create_context), or without one in a fresh interpreter of language. " +
			"Returns what it printed, the value of its last expression, its error, and the images it showed (matplotlib, display()).",
		InputSchema: mcp.Schema{Required: []string{"code"}, Properties: map[string]mcp.Prop{
			"code":     {Type: "string"},
			"language": {Type: "string", Enum: []string{"python", "javascript"}, Description: "without context: the interpreter; python if absent"},
			"context":  {Type: "string", Description: "the id of a context from /create_context; language is then ignored"},
			"timeout": {Type: "number", Description: fmt.Sprintf("seconds after which the code is interrupted (its state kept); %d if absent", int(defaultCodeTimeout.Seconds())),
				Minimum: mcp.Int(1), Maximum: mcp.Int(maxCodeTimeout)},
			"max_output_bytes": outputProp(),
		}},
		Call: s.callRunCode,
	}
}

func (s *Server) callRunCode(ctx context.Context, raw json.RawMessage) mcp.Result {
	a := args[struct {
		Code, Language, Context string
		Timeout                 float64
		MaxOutput               int `json:"max_output_bytes"`
	}](raw)
	if a.Context == "" && a.Language == "" {
		a.Language = "python"
	}
	timeout := defaultCodeTimeout
	if a.Timeout > 0 {
		timeout = time.Duration(a.Timeout * float64(time.Second))
	}
	c, err := s.runCodeContext(ctx, a.Context, a.Language)
	if err != nil {
		return mcp.Errorf(err.Error())
	}
	call, err := c.Run(ctx, contexts.RunRequest{Code: a.Code, Timeout: timeout})
	if err != nil {
		if a.Context == "" {
			_ = s.contexts.Delete(c.ID())
		}
		var re *contexts.RestartedError
		if errors.As(err, &re) {
			return mcp.Errorf(fmt.Sprintf("%s (generation %d)", err, re.Generation))
		}
		return mcp.Errorf(err.Error())
	}
	defer call.Detach() // a client gone: the code runs on, as for /run_code
	o := codeOutput{limit: a.MaxOutput}
	if o.limit <= 0 {
		o.limit = defaultToolOutput
	}
	for {
		evs, comp := call.Take()
		for _, ev := range evs {
			o.add(ev)
		}
		if comp != nil {
			return o.reply(*comp, a.Context)
		}
		select {
		case <-call.Ready():
		case <-ctx.Done():
			return mcp.Errorf("the client left; the code runs on")
		}
	}
}

// codeOutput gathers a call's events in bounded memory: the head and the
// tail of its output text, its result's and error's text, and at most
// maxToolImages images.
type codeOutput struct {
	limit      int
	head, tail []byte
	total      int // bytes of output written, kept or not
	result     string
	errorText  string
	errorEvent map[string]any
	images     []mcp.Content
	imageBytes int
	imagesLeft int // images over the bounds, left out
}

func (o *codeOutput) write(s string) {
	o.total += len(s)
	if room := o.limit/2 - len(o.head); room > 0 {
		n := min(room, len(s))
		o.head = append(o.head, s[:n]...)
		s = s[n:]
	}
	o.tail = append(o.tail, s...)
	if keep := o.limit - o.limit/2; len(o.tail) > 2*keep {
		o.tail = append(o.tail[:0], o.tail[len(o.tail)-keep:]...)
	}
}

func (o *codeOutput) add(ev contexts.Event) {
	d, _ := ev.Data.(map[string]any)
	switch ev.Name {
	case "stdout", "stderr":
		text, _ := d["data"].(string)
		o.write(text)
	case "display", "result":
		data, _ := d["data"].(map[string]json.RawMessage)
		shown := o.addImage(data, "image/png") || o.addImage(data, "image/jpeg")
		var plain string
		_ = json.Unmarshal(data["text/plain"], &plain)
		switch {
		case ev.Name == "result":
			o.result = plain
		case !shown && plain != "":
			o.write(plain + "\n")
		}
	case "error":
		o.errorEvent = d
		name, _ := d["name"].(string)
		value, _ := d["value"].(string)
		tb, _ := d["traceback"].([]string)
		var b strings.Builder
		for _, l := range tb { // Python's lines end in a newline, Node's not
			b.WriteString(strings.TrimSuffix(l, "\n") + "\n")
		}
		if !strings.Contains(b.String(), name) { // Python's ends with "name: value"
			b.WriteString(name + ": " + value + "\n")
		}
		o.errorText = strings.TrimSuffix(b.String(), "\n")
	}
}

// addImage adds data's image of type mime as MCP image content, if it has
// one and it fits the bounds, and reports whether data had one.
func (o *codeOutput) addImage(data map[string]json.RawMessage, mime string) bool {
	var b64 string
	if json.Unmarshal(data[mime], &b64) != nil || b64 == "" {
		return false
	}
	if len(o.images) == maxToolImages || o.imageBytes+len(b64) > maxToolImageBytes {
		o.imagesLeft++
		return true
	}
	o.imageBytes += len(b64)
	o.images = append(o.images, mcp.Content{Type: "image", Data: b64, MIMEType: mime})
	return true
}

// output returns the output kept and how many bytes were left out.
func (o *codeOutput) output() (string, int) {
	if o.total <= o.limit { // nothing was dropped from the tail
		return string(o.head) + string(o.tail), 0
	}
	tail := o.tail[len(o.tail)-min(len(o.tail), o.limit-o.limit/2):]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	head := o.head
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRune(head[i:]) {
				head = head[:i] // the cut fell inside this character
			}
			break
		}
	}
	return string(head) + "\n" + string(tail), o.total - len(head) - len(tail)
}

func (o *codeOutput) reply(comp contexts.Completion, contextID string) mcp.Result {
	out, omitted := o.output()
	res := map[string]any{"status": comp.Status, "output": out, "truncated": omitted > 0,
		"execution_count": comp.ExecutionCount, "generation": comp.Generation, "state_lost": comp.StateLost,
		"duration_ms": comp.DurationMS, "images": len(o.images)}
	text := out
	if o.result != "" {
		res["result"] = o.result
		text += o.result + "\n"
	}
	if o.errorEvent != nil {
		res["error"] = o.errorEvent
		text += o.errorText + "\n"
	}
	if omitted > 0 {
		text += fmt.Sprintf("[output truncated: %d bytes omitted; write large output to a file and read it with read_file]\n", omitted)
	}
	if o.imagesLeft > 0 {
		res["images_omitted"] = o.imagesLeft
		text += fmt.Sprintf("[%d more images left out: at most %d images, %d bytes of base64, per reply; save them to files]\n",
			o.imagesLeft, maxToolImages, maxToolImageBytes)
	}
	text += "[" + comp.Status
	if comp.StateLost {
		text += fmt.Sprintf("; the interpreter was restarted (generation %d): every variable and import is gone", comp.Generation)
	}
	text += "]"
	if contextID != "" {
		res["context"] = contextID
	}
	content := append([]mcp.Content{mcp.Text(text)}, o.images...)
	return mcp.Result{Content: content, Structured: res, IsError: comp.Status != "ok"}
}
