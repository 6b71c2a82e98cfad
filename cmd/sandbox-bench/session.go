package main

import (
	"context"
	"fmt"

	"github.com/sandbox-executor/sandbox-executor/client"
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
	if _, _, err := a.c.CreateSession(ctx, client.SessionConfig{ID: "bench", Reuse: true}); err != nil {
		return err
	}
	defer a.c.DeleteSession(context.WithoutCancel(ctx), "bench")
	// Both kinds go through the client, as figure 1's /run does, so that
	// the ratio is the session's cost alone.
	calls := []func() error{
		func() error { return checkRun(a.c.Run(ctx, client.Command{Cmd: "true"})) },
		func() error { return checkRun(a.c.Run(ctx, client.Command{Cmd: "true", Session: "bench"})) },
	}
	lat, errs := alternate(ctx, sessionCalls, calls)
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
