package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

const sessionCalls = 500 // figure 12

// sectionSession measures figure 12: /run of `true` in a session, against
// the same /run without a session, from the same client, alternating so
// that drift in the machine's speed hits both alike. A session's command
// costs its wrapper (an EXIT trap that writes pwd and export -p to a
// file), the state file, and the agent's parse and commit of it.
func (b *bench) sectionSession(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	if err := a.call(ctx, http.MethodPost, "/create_session", []byte(`{"id":"bench","reuse":true}`), nil); err != nil {
		return err
	}
	defer a.call(context.WithoutCancel(ctx), http.MethodPost, "/delete_session", []byte(`{"id":"bench"}`), nil)
	plain := []byte(`{"cmd":"true"}`)
	inSession := []byte(`{"cmd":"true","session":"bench"}`)
	calls := []func() error{
		func() error { return checkRun(a.run(ctx, plain)) },
		func() error { return checkRun(a.run(ctx, inSession)) },
	}
	lat := make([][]time.Duration, len(calls))
	var errs errorList
	for i := 0; i < runWarmup+sessionCalls && ctx.Err() == nil; i++ {
		for k, call := range calls {
			t0 := time.Now()
			err := call()
			if i >= runWarmup {
				lat[k] = append(lat[k], time.Since(t0))
			}
			if err != nil {
				errs.add("call kind %d: %v", k, err)
			}
		}
	}
	if len(lat[1]) < sessionCalls {
		return fmt.Errorf("only %d of %d calls within the section's time", len(lat[1]), sessionCalls)
	}
	const ref = "/run of `true` without a session"
	f := newFigure("12 session", "/run of `true` in a session, median", ms(median(lat[1])), "ms").
		withRef(ms(median(lat[0])), ref)
	f = f.withTarget("≤ 1.15× ref", f.Ratio != nil && *f.Ratio <= 1.15)
	if errs.count() > 0 {
		f = f.withTarget("≤ 1.15× ref, no error", false).withNote("%s", errs.String())
	}
	b.rep.add(f)
	b.rep.add(newFigure("12 session", "/run of `true` in a session, p99", ms(percentile(lat[1], 99)), "ms").
		withRef(ms(percentile(lat[0], 99)), ref))
	return nil
}
