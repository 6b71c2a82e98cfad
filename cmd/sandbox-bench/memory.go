package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	idleSettle       = 300 * time.Millisecond
	ringProcs        = 100    // figure 7: finished processes holding full rings
	ringProcLines    = 20_000 // each prints seq 1 ringProcLines
	ringLines        = 10_000 // procs.Options.MaxLines default
	leakCalls        = 10_000 // figure 7: /run calls
	leakSampleEvery  = 1_000
	leakClients      = 4
	startups         = 10 // figure 8
	idleTargetMB     = 10
	startupTarget    = 50 * time.Millisecond
	binaryTargetMB   = 12
	fdGrowthAllowed  = 2   // descriptors: a keep-alive connection more or less
	rssSlopeAllowedK = 256 // KiB per 1,000 calls before it counts as a trend
)

// mbToMiB converts the targets, given in MB (10^6 bytes), to MiB.
func mbToMiB(mb float64) float64 { return mb * 1e6 / (1 << 20) }

// sectionMemory measures figure 7 on fresh agents: idle RSS, RSS with 100
// finished processes holding full rings, and RSS and open descriptors
// over 10,000 /run calls.
func (b *bench) sectionMemory(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*sectionTimeout)
	defer cancel()
	if err := b.memoryRings(ctx); err != nil {
		return err
	}
	return b.memoryRuns(ctx)
}

// memoryRings measures idle RSS and RSS with ringProcs full rings.
func (b *bench) memoryRings(ctx context.Context) error {
	a, err := startAgent(ctx, b.bin, gcTrace)
	if err != nil {
		return err
	}
	defer a.stop()
	time.Sleep(idleSettle)
	idle := a.rssMiB()
	b.rep.add(newFigure("7 memory", "agent RSS at idle", idle, "MiB").
		withTarget(fmt.Sprintf("≤ %.2f MiB (10 MB)", mbToMiB(idleTargetMB)), idle <= mbToMiB(idleTargetMB)))

	ids := make([]string, 0, ringProcs)
	for range ringProcs {
		id, err := a.startProcess(ctx, fmt.Sprintf("seq 1 %d", ringProcLines))
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if _, err := waitFinished(ctx, a, id, func() {}); err != nil {
			return err
		}
	}
	retained, err := countRetained(ctx, a, ids[0])
	if err != nil {
		return err
	}
	time.Sleep(idleSettle)
	full := a.rssMiB()
	gc, _ := a.gcStats()
	// What the ring accounts for each process: the last 10,000 lines
	// (10001..20000, 5 digits each) plus 48 bytes of bookkeeping per line.
	accounted := float64(ringLines*(5+48)) / (1 << 20)
	b.rep.add(newFigure("7 memory", "RSS, 100 finished procs with full rings", full, "MiB").
		withRef(idle+ringProcs*accounted, "idle + 100 × the ring's own accounting").
		withNote("%.3f MiB per process vs %.3f MiB accounted; a ring of one process retains %d lines; "+
			"Go heap at the last GC: %.0f MB live, next GC at %.0f MB (gctrace, whole MB)",
			(full-idle)/ringProcs, accounted, retained, gc.liveMB, gc.goalMB))
	return nil
}

// countRetained reads the retained lines of process id with follow=false
// and counts them.
func countRetained(ctx context.Context, a *agent, id string) (int, error) {
	n := 0
	for ev, err := range a.c.ProcessLogs(ctx, id, client.LogsOptions{NoFollow: true}) {
		if err != nil {
			return n, err
		}
		if ev.Type == client.EventLog {
			n++
		}
	}
	return n, nil
}

// memorySample is the agent's state after some /run calls.
type memorySample struct {
	Calls   int     `json:"calls"`
	RSSMiB  float64 `json:"rss_mib"`
	FDs     int     `json:"fds"`
	Threads int     `json:"threads"`
}

// memoryRuns makes leakCalls /run calls from leakClients clients in steps
// of leakSampleEvery and samples RSS, descriptors and threads after each.
func (b *bench) memoryRuns(ctx context.Context) error {
	a, err := startAgent(ctx, b.bin, gcTrace)
	if err != nil {
		return err
	}
	defer a.stop()
	time.Sleep(idleSettle)
	samples := []memorySample{{0, a.rssMiB(), a.fds(), a.threads()}}
	gc0, _ := a.gcStats()
	var errs errorList
	call := func() error {
		r, err := a.c.Run(ctx, client.Command{Cmd: "echo hi"})
		if err == nil && (r.Stdout != "hi\n" || r.Code != 0) {
			err = fmt.Errorf("stdout %q code %d", r.Stdout, r.Code)
		}
		return err
	}
	for done := 0; done < leakCalls && ctx.Err() == nil; done += leakSampleEvery {
		_, _, n := fanOutCalls(ctx, leakClients, leakSampleEvery, call, &errs)
		if n < leakSampleEvery {
			return fmt.Errorf("/run calls: out of time after %d", done+n)
		}
		samples = append(samples, memorySample{done + n, a.rssMiB(), a.fds(), a.threads()})
	}
	b.rep.setInfo("memory_run_samples", samples)
	gc1, _ := a.gcStats()
	first, last := samples[0], samples[len(samples)-1]
	slope := rssSlope(samples[1:]) * 1024 // KiB per 1,000 calls, after the first thousand
	fdTrend := last.FDs > samples[1].FDs+fdGrowthAllowed
	rssTrend := slope > rssSlopeAllowedK
	f := newFigure("7 memory", "RSS after 10,000 /run calls", last.RSSMiB, "MiB").
		withRef(first.RSSMiB, "before the calls").
		withTarget("no growth trend", !rssTrend).
		withNote("RSS slope over calls 1,000..10,000: %.0f KiB per 1,000 calls; samples %s; "+
			"%d garbage collections, live heap %.0f MB after the last (gctrace)",
			slope, sampleList(samples), gc1.cycles-gc0.cycles, gc1.liveMB)
	b.rep.add(f)
	b.rep.add(newFigure("7 memory", "open fds after 10,000 /run calls", float64(last.FDs), "fds").
		withRef(float64(first.FDs), "before the calls").
		withTarget("no growth trend", !fdTrend).
		withNote("threads %d before, %d after; %d keep-alive client connections are open during the calls",
			first.Threads, last.Threads, leakClients))
	if errs.count() > 0 {
		b.rep.add(newFigure("7 memory", "/run errors during the 10,000 calls", float64(errs.count()), "errors").
			withTarget("0", false).withNote("%s", errs.String()))
	}
	return nil
}

// rssSlope is the least-squares slope of RSS in MiB per 1,000 calls.
func rssSlope(s []memorySample) float64 {
	if len(s) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range s {
		x := float64(p.Calls) / 1000
		sx, sy, sxx, sxy = sx+x, sy+p.RSSMiB, sxx+x*x, sxy+x*p.RSSMiB
	}
	n := float64(len(s))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func sampleList(s []memorySample) string {
	out := ""
	for i, p := range s {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%dk:%.1fMiB/%dfd", p.Calls/1000, p.RSSMiB, p.FDs)
	}
	return out
}

// sectionStartup measures figure 8: exec to a healthy /health, median of
// ten starts, and the binary's size.
func (b *bench) sectionStartup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	var times []time.Duration
	for i := 0; i < startups && ctx.Err() == nil; i++ {
		a, err := startAgent(ctx, b.bin)
		if err != nil {
			return err
		}
		times = append(times, a.healthy)
		a.stop()
	}
	med := median(times)
	b.rep.add(newFigure("8 start-up", "exec to healthy /health, median of 10", ms(med), "ms").
		withTarget("≤ 50 ms", med <= startupTarget).
		withNote("max %.1f ms; /health polled every %s on fresh connections", ms(percentile(times, 100)), healthPoll))
	fi, err := os.Stat(b.bin)
	if err != nil {
		return err
	}
	size := float64(fi.Size()) / 1e6
	b.rep.add(newFigure("8 start-up", "static binary size", size, "MB").
		withTarget("≤ 12 MB", size <= binaryTargetMB))
	return nil
}
