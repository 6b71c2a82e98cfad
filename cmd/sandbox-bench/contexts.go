package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	contextCalls   = 300       // figure 19: run_code of 1+1, and /run of true
	contextCreates = 15        // figure 19: contexts created, and python3 -c pass run
	contextLines   = 1_000_000 // figure 19: lines printed in a context
	contextRepeats = 3
)

// sectionContexts measures figure 19: a code context's call, its creation
// and its output rate, each against the nearest thing without a context,
// alternating so that drift in the machine's speed hits both alike.
func (b *bench) sectionContexts(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*sectionTimeout)
	defer cancel()
	info, err := a.c.CreateContext(ctx, client.ContextConfig{Language: "python"})
	if err != nil {
		return fmt.Errorf("python3 on the agent's PATH? %w", err)
	}
	defer a.c.DeleteContext(context.WithoutCancel(ctx), info.ID)

	calls := []func() error{
		func() error { return checkRun(a.c.Run(ctx, client.Command{Cmd: "true"})) },
		func() error { return codeResult(ctx, a.c, client.CodeRun{Context: info.ID, Code: "1+1"}, "2") },
	}
	lat, errs := alternate(ctx, contextCalls, calls)
	f := newFigure("19 contexts", "run_code of 1+1 in a warm context, median", ms(median(lat[1])), "ms").
		withRef(ms(median(lat[0])), "/run of `true`")
	b.rep.add(withErrors(f.withTarget("≤ 1.0× ref", f.Ratio != nil && *f.Ratio <= 1.0), errs))

	creates := []func() error{
		func() error { return checkRun(a.c.Run(ctx, client.Command{Cmd: "python3 -c pass"})) },
		func() error {
			c, err := a.c.CreateContext(ctx, client.ContextConfig{Language: "python"})
			if err == nil {
				err = a.c.DeleteContext(ctx, c.ID)
			}
			return err
		},
	}
	lat, errs = alternate(ctx, contextCreates, creates)
	f = newFigure("19 contexts", "create_context of Python (ready), median", ms(median(lat[1])), "ms").
		withRef(ms(median(lat[0])), "/run of `python3 -c pass`")
	b.rep.add(withErrors(f.withTarget("≤ 1.3× ref", f.Ratio != nil && *f.Ratio <= 1.3), errs))

	return b.contextOutput(ctx, a, info.ID)
}

// contextOutput measures the lines per second a context's print loop
// reaches a Go client, against the same loop run by /run_streaming.
func (b *bench) contextOutput(ctx context.Context, a *agent, id string) error {
	code := fmt.Sprintf("for i in range(%d): print(i)", contextLines)
	var inCtx, ref []float64
	for range contextRepeats {
		t0 := time.Now()
		n, err := codeLines(ctx, a.c, client.CodeRun{Context: id, Code: code})
		if err != nil {
			return err
		}
		if n != contextLines {
			return fmt.Errorf("run_code: %d lines, want %d", n, contextLines)
		}
		inCtx = append(inCtx, contextLines/time.Since(t0).Seconds())
		t0 = time.Now()
		n = 0
		for ev, err := range a.c.RunStream(ctx, client.Command{Cmd: fmt.Sprintf("python3 -c '%s'", code)}) {
			if err != nil {
				return err
			}
			if ev.Type == client.EventOutput {
				n++
			}
		}
		if n != contextLines {
			return fmt.Errorf("run_streaming: %d lines, want %d", n, contextLines)
		}
		ref = append(ref, contextLines/time.Since(t0).Seconds())
	}
	f := newFigure("19 contexts", "print loop of 10**6 lines in a context, lines/s", medianFloat(inCtx), "lines/s").
		withRef(medianFloat(ref), "the same loop by /run_streaming of python3 -c")
	b.rep.add(f.withTarget("≥ 0.5× ref", f.Ratio != nil && *f.Ratio >= 0.5))
	return nil
}

func withErrors(f figure, errs *errorList) figure {
	if errs.count() > 0 {
		return f.withTarget(f.Target+", no error", false).withNote("%s", errs.String())
	}
	return f
}

// codeResult runs run and checks that its result is want.
func codeResult(ctx context.Context, c *client.Client, run client.CodeRun, want string) error {
	var got string
	for ev, err := range c.RunCode(ctx, run) {
		if err != nil {
			return err
		}
		if ev.Name == "result" {
			var d struct {
				Data map[string]string `json:"data"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return err
			}
			got = d.Data["text/plain"]
		}
	}
	if got != want {
		return fmt.Errorf("result %q, want %q", got, want)
	}
	return nil
}

// codeLines runs run and counts the lines of its stdout.
func codeLines(ctx context.Context, c *client.Client, run client.CodeRun) (int, error) {
	n := 0
	for ev, err := range c.RunCode(ctx, run) {
		if err != nil {
			return n, err
		}
		if ev.Name == "stdout" {
			var d struct {
				Data string `json:"data"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return n, err
			}
			n += bytes.Count([]byte(d.Data), []byte{'\n'})
		}
	}
	return n, nil
}
