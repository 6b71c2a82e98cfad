package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

const (
	mcpCalls     = 1000 // figure 16, tools/list
	mcpExecCalls = 300  // figure 16, exec
)

// sectionMCP measures figure 16: an MCP tools/list over POST /mcp against
// GET /health, then an MCP exec of `true` against /run of `true`, each
// pair from the same client, alternating. tools/list costs the JSON-RPC
// decode and the encoding of every tool's schemas on top of a request
// through the same layers; exec is /run with yield_ms, so it adds the
// JSON-RPC layer and a background process's record (its output ring,
// its stdin pipe) to /run's work.
func (b *bench) sectionMCP(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	do := func(method, path string, body []byte, want string) error {
		req, err := a.request(ctx, method, path, body)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := a.hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(want))) {
			err = fmt.Errorf("%s %s: %s: %.200s", method, path, resp.Status, got)
		}
		return err
	}
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	calls := []func() error{
		func() error { return do(http.MethodGet, "/health", nil, `"ok"`) },
		func() error { return do(http.MethodPost, "/mcp", list, `"read_file"`) },
	}
	lat, errs := alternate(ctx, mcpCalls, calls)
	if len(lat[1]) < mcpCalls {
		return fmt.Errorf("only %d of %d calls within the section's time", len(lat[1]), mcpCalls)
	}
	const ref = "GET /health"
	f := newFigure("16 mcp", "MCP tools/list over /mcp, median", us(median(lat[1])), "µs").
		withRef(us(median(lat[0])), ref)
	f = f.withTarget("≤ 2× ref", f.Ratio != nil && *f.Ratio <= 2)
	if errs.count() > 0 {
		f = f.withTarget("≤ 2× ref, no error", false).withNote("%s", errs.String())
	}
	b.rep.add(f)
	b.rep.add(newFigure("16 mcp", "MCP tools/list over /mcp, p99", us(percentile(lat[1], 99)), "µs").
		withRef(us(percentile(lat[0], 99)), ref))
	return b.mcpExec(ctx, do)
}

// mcpExec measures figure 16's MCP exec of `true` against /run of `true`.
func (b *bench) mcpExec(ctx context.Context, do func(method, path string, body []byte, want string) error) error {
	exec := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"cmd":"true"}}}`)
	calls := []func() error{
		func() error { return do(http.MethodPost, "/run", []byte(`{"cmd":"true"}`), `"code":0`) },
		func() error { return do(http.MethodPost, "/mcp", exec, `"exit_code":0`) },
	}
	for range runWarmup {
		for _, c := range calls {
			_ = c()
		}
	}
	lat, errs := alternate(ctx, mcpExecCalls, calls)
	if len(lat[1]) < mcpExecCalls {
		return fmt.Errorf("only %d of %d exec calls within the section's time", len(lat[1]), mcpExecCalls)
	}
	const ref = "POST /run of true"
	f := newFigure("16 mcp", "MCP exec of true over /mcp, median", us(median(lat[1])), "µs").
		withRef(us(median(lat[0])), ref)
	f = f.withTarget("≤ 1.3× ref", f.Ratio != nil && *f.Ratio <= 1.3)
	if errs.count() > 0 {
		f = f.withTarget("≤ 1.3× ref, no error", false).withNote("%s", errs.String())
	}
	b.rep.add(f)
	b.rep.add(newFigure("16 mcp", "MCP exec of true over /mcp, p99", us(percentile(lat[1], 99)), "µs").
		withRef(us(percentile(lat[0], 99)), ref))
	return nil
}
