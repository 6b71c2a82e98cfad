package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// sectionYield measures figure 22: what yield_ms and /poll_process cost
// on top of what they replace. A /run of `true` with yield_ms, which
// starts the command as a polled background process, against a plain
// /run of `true`; and a poll with nothing new against GET /health, a
// round trip that does no work. All four calls use the raw HTTP/1.1
// client on connections of their own, and alternate.
func (b *bench) sectionYield(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	id, err := startYielded(a, "sleep 600")
	if err != nil {
		return err
	}
	defer func() { _ = a.c.KillProcess(context.WithoutCancel(ctx), id, "SIGKILL") }()
	var raws [4]*rawClient
	for i, spec := range []struct{ method, path, body string }{
		{http.MethodPost, "/run", `{"cmd":"true","yield_ms":10000}`},
		{http.MethodPost, "/run", `{"cmd":"true"}`},
		{http.MethodPost, "/poll_process", fmt.Sprintf(`{"id":%q}`, id)},
		{http.MethodGet, "/health", ""},
	} {
		var body []byte
		if spec.body != "" {
			body = []byte(spec.body)
		}
		if raws[i], err = dialRaw(a, spec.method, spec.path, body); err != nil {
			return err
		}
		defer raws[i].close()
	}
	calls := make([]func() error, len(raws))
	for i, raw := range raws {
		calls[i] = func() error { _, err := raw.do(); return err }
	}
	calls[0] = func() error { return checkRun(decodeRun(raws[0].do())) }
	calls[1] = func() error { return checkRun(decodeRun(raws[1].do())) }
	lat, errs := alternate(ctx, runCalls, calls)
	if len(lat[0]) < runCalls {
		return fmt.Errorf("only %d of %d calls within the section's time", len(lat[0]), runCalls)
	}
	yield := newFigure("22 yield", "/run of `true` with yield_ms, median", ms(median(lat[0])), "ms").
		withRef(ms(median(lat[1])), "plain /run of `true`").ratioAtMost(1.1)
	pollFig := newFigure("22 yield", "/poll_process with nothing new, median", ms(median(lat[2])), "ms").
		withRef(ms(median(lat[3])), "GET /health").ratioAtMost(1.5)
	if errs.count() > 0 {
		yield = yield.withNote("%s", errs.String())
	}
	b.rep.add(yield)
	b.rep.add(pollFig)
	return nil
}

// startYielded starts cmd through /run with yield_ms 0 and returns the id
// of the process it became.
func startYielded(a *agent, cmd string) (string, error) {
	body, err := json.Marshal(map[string]any{"cmd": cmd, "yield_ms": 0})
	if err != nil {
		return "", err
	}
	raw, err := dialRaw(a, http.MethodPost, "/run", body)
	if err != nil {
		return "", err
	}
	defer raw.close()
	reply, err := raw.do()
	if err != nil {
		return "", err
	}
	var r struct{ ID string }
	if err := json.Unmarshal(reply, &r); err != nil || r.ID == "" {
		return "", fmt.Errorf("/run with yield_ms: no id in %q (%v)", reply, err)
	}
	return r.ID, nil
}
