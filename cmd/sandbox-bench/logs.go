package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	fanoutLines   = 500_000 // figure 4: seq 1 fanoutLines
	fanoutReaders = 50
)

// readerResult is what one log reader saw.
type readerResult struct {
	lines  uint64    // log events received
	missed uint64    // lines reported by missed events
	doneAt time.Time // when complete was parsed
	err    error
}

// sectionFanout measures figure 4: one process printing 500,000 lines,
// read by one reader alone, then by 50 at once. Every reader must get
// every retained line in order.
func (b *bench) sectionFanout(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	one, oneRes, err := fanout(ctx, a, 1)
	if err != nil {
		return err
	}
	all, allRes, err := fanout(ctx, a, fanoutReaders)
	if err != nil {
		return err
	}
	bad, firstErr := 0, error(nil)
	var lines, missed uint64
	for _, r := range append(allRes, oneRes...) {
		if r.err != nil {
			bad++
			firstErr = cmp.Or(firstErr, r.err)
		}
	}
	for _, r := range allRes {
		lines, missed = lines+r.lines, missed+r.missed
	}
	b.rep.add(newFigure("4 logs fan-out", "50 readers, time to last complete", ms(all), "ms").
		withRef(ms(one), "one reader alone").
		withNote("50 readers: %.0f lines and %.0f missed per reader on average; one reader: %d lines, %d missed",
			float64(lines)/fanoutReaders, float64(missed)/fanoutReaders, oneRes[0].lines, oneRes[0].missed))
	f := newFigure("4 logs fan-out", "readers with every retained line in order", float64(fanoutReaders+1-bad), "readers").
		withTarget("51 of 51 (50 + the lone one)", bad == 0)
	if firstErr != nil {
		f = f.withNote("%d readers failed, first: %v", bad, firstErr)
	}
	b.rep.add(f)
	return nil
}

// fanout starts seq 1 fanoutLines and, right after, n log readers. It
// returns the time from the start request until the last reader had
// parsed complete.
func fanout(ctx context.Context, a *agent, n int) (time.Duration, []readerResult, error) {
	start := time.Now()
	id, err := a.startProcess(ctx, fmt.Sprintf("seq 1 %d", fanoutLines))
	if err != nil {
		return 0, nil, err
	}
	res := make([]readerResult, n)
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go logReader(ctx, &wg, a, id, fanoutLines, &res[i])
	}
	wg.Wait()
	var last time.Time
	for _, r := range res {
		if r.doneAt.After(last) {
			last = r.doneAt
		}
	}
	return last.Sub(start), res, nil
}

// logReader follows the logs of process id and checks them: each log
// event's number is the previous one plus 1, or plus 1 plus the count of a
// missed event just before it; each line's data equals its number;
// complete comes once total lines are accounted for. It reads through the
// client, over one connection (ProcessLogs: a cut stream is an error, not
// a reconnection).
//
// logReader runs in its own goroutine, one per reader; it ends when the
// stream ends, fails or ctx ends. wg is its owner's count.
func logReader(ctx context.Context, wg *sync.WaitGroup, a *agent, id string, total uint64, res *readerResult) {
	defer wg.Done()
	next := uint64(1)
	var num []byte
	for ev, err := range a.c.ProcessLogs(ctx, id, client.LogsOptions{}) {
		if err != nil {
			res.err = fmt.Errorf("after line %d: %w", next-1, err)
			return
		}
		switch ev.Type {
		case client.EventLog:
			num = strconv.AppendUint(num[:0], ev.Seq, 10)
			if ev.Seq != next || string(ev.Data) != string(num) || ev.Stream != client.Stdout {
				res.err = fmt.Errorf("want line %d, got number %d data %q stream %s", next, ev.Seq, ev.Data, ev.Stream)
				return
			}
			next++
			res.lines++
		case client.EventMissed:
			if ev.Missed == 0 {
				res.err = errors.New("missed event without a count")
				return
			}
			next += ev.Missed
			res.missed += ev.Missed
		case client.EventComplete:
			if next-1 != total {
				res.err = fmt.Errorf("complete after %d lines and %d missed, want %d", res.lines, res.missed, total)
				return
			}
			res.doneAt = time.Now()
			return
		}
	}
	res.err = fmt.Errorf("the stream ended after line %d without complete", next-1)
}
