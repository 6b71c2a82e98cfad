package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

const mcpDoc = `Serves MCP over stdio and forwards each message to the agent's /mcp, for
MCP clients that only start local commands (Claude Code, Cursor: the README
has their configuration). -url is the agent's base URL; /mcp is appended
unless it ends in it. The token comes from SANDBOX_SECRET. stdout carries
only MCP messages, stderr the rest; it exits 0 when stdin ends.
`

// Bounds of the stdio forwarder.
const (
	maxMCPMessage  = 64 << 20 // bytes of one message, either way
	maxMCPInFlight = 16       // requests forwarded at once; the next waits
)

// codeHTTPError is the JSON-RPC error code of a request the agent's HTTP
// layer refused (401, 5xx) or that never reached it.
const codeHTTPError = -32000

// mcp runs "sandbox-executor mcp": the stdio transport in front of /mcp.
func (c *cli) mcp(ctx context.Context, args []string) error {
	fs := c.flagSet("mcp", "-url URL", mcpDoc)
	cf := addConnFlags(fs.FlagSet)
	if rest, err := c.parse(fs, args, true); err != nil {
		return err
	} else if len(rest) > 0 {
		return c.usageError(fs, "unexpected argument %q", rest[0])
	}
	url := cmpOr(cf.url, c.getenv("SANDBOX_URL"))
	token := cmpOr(cf.token, c.getenv("SANDBOX_SECRET"))
	if url == "" || token == "" {
		return errors.New("give -url (or SANDBOX_URL) and set SANDBOX_SECRET to the agent's secret")
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if url = strings.TrimRight(url, "/"); !strings.HasSuffix(url, "/mcp") {
		url += "/mcp"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	f := &mcpForwarder{url: url, token: token, http: &http.Client{Transport: tr}, out: c.stdout, log: c.stderr}
	return f.serve(ctx, c.stdin)
}

// mcpForwarder forwards MCP messages from stdin to an agent's /mcp and
// writes the replies to out, one per line.
type mcpForwarder struct {
	url, token string
	http       *http.Client
	log        io.Writer // stderr

	// mu guards out, and version: a reply is written whole, and the
	// version a 2025-x initialize negotiated goes with later requests.
	mu      sync.Mutex
	out     io.Writer
	version string
}

// serve reads messages from in until it ends (nil) or ctx does, and waits
// for the requests in flight.
func (f *mcpForwarder) serve(ctx context.Context, in io.Reader) error {
	lines := make(chan mcpLine)
	go readMCPLines(ctx, bufio.NewReaderSize(in, 64<<10), lines)
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxMCPInFlight)
	for {
		var l mcpLine
		select {
		case l = <-lines:
		case <-ctx.Done():
			// The reader may be blocked on stdin, which nothing can
			// interrupt: it is left to end with the process.
			return ctx.Err()
		}
		if msg := bytes.TrimSpace(l.data); len(msg) > 0 {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			wg.Add(1)
			go f.forward(ctx, &wg, slots, msg)
		}
		switch {
		case errors.Is(l.err, io.EOF):
			return nil
		case l.err != nil:
			return l.err
		}
	}
}

// mcpLine is one line of stdin, or the error that ended it.
type mcpLine struct {
	data []byte
	err  error
}

// readMCPLines sends the lines of r to lines, the last with the error
// that ended r. It runs in its own goroutine; it ends after that line, or
// once ctx ends and its read returns.
func readMCPLines(ctx context.Context, r *bufio.Reader, lines chan<- mcpLine) {
	for {
		data, err := readMCPLine(r)
		select {
		case lines <- mcpLine{data, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// readMCPLine reads one line of at most maxMCPMessage bytes; a longer one
// is an error, since its end cannot be found without holding it.
func readMCPLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxMCPMessage {
			return nil, fmt.Errorf("an MCP message over %d bytes", maxMCPMessage)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// forward sends msg to the agent and writes the reply. It runs in its own
// goroutine; it ends when the agent has answered, or ctx ends.
func (f *mcpForwarder) forward(ctx context.Context, wg *sync.WaitGroup, slots <-chan struct{}, msg []byte) {
	defer wg.Done()
	defer func() { <-slots }()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string                     `json:"name"`
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil {
		f.fail(nil, "not a JSON-RPC message: the agent was not asked")
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(msg))
	if err != nil {
		f.fail(m.ID, err.Error())
		return
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	f.setVersionHeaders(req, m.Method, m.Params.Name, m.Params.Meta)
	resp, err := f.http.Do(req)
	if err != nil {
		f.fail(m.ID, "cannot reach the agent at "+f.url+": "+err.Error())
		return
	}
	defer resp.Body.Close()
	f.relay(m.ID, m.Method, resp)
}

// setVersionHeaders sets the headers of the version msg follows: 2026-07-28
// names its own in _meta, with its method and tool; a 2025-x request
// carries the version its initialize negotiated.
func (f *mcpForwarder) setVersionHeaders(req *http.Request, method, name string, meta map[string]json.RawMessage) {
	var v string
	if raw, ok := meta["io.modelcontextprotocol/protocolVersion"]; ok && json.Unmarshal(raw, &v) == nil {
		req.Header.Set("MCP-Protocol-Version", v)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		return
	}
	f.mu.Lock()
	v = f.version
	f.mu.Unlock()
	if v != "" && method != "initialize" {
		req.Header.Set("MCP-Protocol-Version", v)
	}
}

// relay writes the agent's reply to the request id (none for a
// notification): its JSON-RPC messages as they are, or an error naming
// the HTTP status the agent answered with.
func (f *mcpForwarder) relay(id json.RawMessage, method string, resp *http.Response) {
	body := io.LimitReader(resp.Body, maxMCPMessage)
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return
	}
	if resp.StatusCode == http.StatusUnauthorized {
		f.fail(id, "HTTP 401 Unauthorized: the agent refused the token; set SANDBOX_SECRET to its secret")
		return
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct == "text/event-stream" {
		sr := sse.NewReader(body)
		for {
			ev, err := sr.Next()
			switch {
			case errors.Is(err, io.EOF):
				return
			case err != nil:
				f.fail(id, "the agent's event stream broke: "+err.Error())
				return
			case len(ev.Data) > 0:
				f.write(method, ev.Data)
			}
		}
	}
	data, err := io.ReadAll(body)
	var probe struct {
		JSONRPC string `json:"jsonrpc"`
	}
	if err != nil || ct != "application/json" || json.Unmarshal(data, &probe) != nil || probe.JSONRPC != "2.0" {
		f.fail(id, fmt.Sprintf("HTTP %d from the agent: %s", resp.StatusCode, bytes.TrimSpace(data)))
		return
	}
	f.write(method, data)
}

// write writes one message to out, on one line, and notes the version an
// initialize negotiated.
func (f *mcpForwarder) write(method string, data []byte) {
	var line bytes.Buffer
	if json.Compact(&line, data) != nil {
		return
	}
	line.WriteByte('\n')
	f.mu.Lock()
	defer f.mu.Unlock()
	if method == "initialize" {
		var r struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(data, &r) == nil && r.Result.ProtocolVersion != "" {
			f.version = r.Result.ProtocolVersion
		}
	}
	_, _ = f.out.Write(line.Bytes())
}

// fail answers request id with a JSON-RPC error, or, for a notification
// (no id), says why on stderr.
func (f *mcpForwarder) fail(id json.RawMessage, msg string) {
	if len(id) == 0 || string(id) == "null" {
		fmt.Fprintln(f.log, "sandbox-executor mcp:", msg)
		return
	}
	data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": codeHTTPError, "message": msg}})
	f.write("", data)
}
