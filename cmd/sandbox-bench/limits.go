package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// limitsCalls is how many calls of each kind the limits section times.
const limitsCalls = 200

// sectionLimits measures figure 18: what a limit and a readiness wait cost.
// /run of `true` with limits: {"cpu_seconds": 10} (the shell stopped after
// its execve by ptrace, a prlimit and a detach; where ptrace is refused,
// the rlimit helper, one more execve of the agent's binary) against a plain
// /run of `true`; /wait_for_port on a port that already listens against GET
// /health. Each figure's two kinds alternate by themselves, on raw
// HTTP/1.1 clients, so that drift in the machine's speed hits them alike.
// They once alternated as one round of four, in which wait_for_port came
// just after a plain /run and paid for its after-effects (the child
// reaped, its pipes closed) while /health, after wait_for_port, did not:
// about 10 µs, 0.15× of the ratio, in quiet runs.
func (b *bench) sectionLimits(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close() // which ends acceptAndClose
	go acceptAndClose(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	kinds := []struct {
		method, path, body string
	}{
		{http.MethodPost, "/run", `{"cmd":"true","limits":{"cpu_seconds":10}}`},
		{http.MethodPost, "/run", `{"cmd":"true"}`},
		{http.MethodPost, "/wait_for_port", `{"port":` + strconv.Itoa(port) + `}`},
		{http.MethodGet, "/health", ""},
	}
	calls := make([]func() error, len(kinds))
	for i, k := range kinds {
		var body []byte
		if k.body != "" {
			body = []byte(k.body)
		}
		raw, err := dialRaw(a, k.method, k.path, body)
		if err != nil {
			return err
		}
		defer raw.close()
		check := checkRunReply
		if k.path == "/wait_for_port" {
			check = checkReady
		} else if k.path == "/health" {
			check = func([]byte, error) error { return nil }
		}
		calls[i] = func() error { return check(raw.do()) }
	}
	lat, errs := alternate(ctx, limitsCalls, calls[:2])
	if len(lat[0]) < limitsCalls {
		return fmt.Errorf("only %d of %d calls within the section's time", len(lat[0]), limitsCalls)
	}
	waits, waitErrs := alternate(ctx, limitsCalls, calls[2:])
	if len(waits[0]) < limitsCalls {
		return fmt.Errorf("only %d of %d calls within the section's time", len(waits[0]), limitsCalls)
	}
	lim := newFigure("18 limits", "/run `true` with cpu_seconds median", ms(median(lat[0])), "ms").
		withRef(ms(median(lat[1])), "plain /run `true`").ratioAtMost(1.3).
		withNote("ptrace: a stop after execve, prlimit, detach (the helper's extra execve where ptrace is refused)")
	wait := newFigure("18 limits", "wait_for_port on a listening port median", ms(median(waits[0])), "ms").
		withRef(ms(median(waits[1])), "GET /health").ratioAtMost(2)
	if errs.count() > 0 {
		lim = lim.withTarget("≤ 1.3× ref, no error", false).withNote("%s", errs.String())
	}
	if waitErrs.count() > 0 {
		wait = wait.withTarget("≤ 2× ref, no error", false).withNote("%s", waitErrs.String())
	}
	b.rep.add(lim)
	b.rep.add(wait)
	return nil
}

// acceptAndClose accepts connections on ln and closes them. It runs in its
// own goroutine; it ends when ln is closed.
func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

func checkRunReply(b []byte, err error) error { return checkRun(decodeRun(b, err)) }

func checkReady(b []byte, err error) error {
	var r struct {
		Ready     bool   `json:"ready"`
		LastError string `json:"last_error"`
	}
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err == nil && !r.Ready {
		err = fmt.Errorf("not ready: %s", r.LastError)
	}
	return err
}
