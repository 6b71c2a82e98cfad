package mcp

import (
	"context"
	"encoding/json"
)

// Tool is one tool the server offers.
type Tool struct {
	Name        string
	Title       string
	Description string
	InputSchema Schema
	// OutputSchema, if not nil, is the JSON Schema of the tool's
	// structuredContent, offered to clients as it is.
	OutputSchema json.RawMessage
	// Call runs the tool with arguments that passed InputSchema. It
	// reports a failure of the tool's work (a file not found, a command
	// that exits non-zero) as a Result with IsError, never as a protocol
	// error. ctx ends if the client leaves.
	Call func(ctx context.Context, args json.RawMessage) Result
}

// Result is what a tool call returns.
type Result struct {
	// Content is what the model reads: text and images. If empty, the
	// JSON of Structured is sent as its one text item.
	Content []Content
	// Structured, if not nil, is sent as structuredContent: a JSON object.
	Structured any
	IsError    bool
}

// Content is one item of a Result's content.
type Content struct {
	Type     string `json:"type"` // "text" or "image"
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`     // base64, for an image
	MIMEType string `json:"mimeType,omitempty"` // for an image
}

// Text returns a text Content.
func Text(s string) Content { return Content{Type: "text", Text: s} }

// Errorf returns a Result with IsError and the reason as its text.
func Errorf(text string) Result {
	return Result{Content: []Content{Text(text)}, IsError: true}
}

// wire is r as the protocol sends it.
func (r Result) wire(newProtocol bool) map[string]any {
	content := r.Content
	if len(content) == 0 {
		b, _ := json.Marshal(r.Structured)
		content = []Content{Text(string(b))}
	}
	m := map[string]any{"content": content}
	if r.Structured != nil {
		m["structuredContent"] = r.Structured
	}
	if r.IsError {
		m["isError"] = true
	}
	if newProtocol {
		m["resultType"] = "complete"
	}
	return m
}

// wire is t as tools/list describes it.
func (t Tool) wire() map[string]any {
	m := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema}
	if t.Title != "" {
		m["title"] = t.Title
	}
	if t.OutputSchema != nil {
		m["outputSchema"] = t.OutputSchema
	}
	return m
}
