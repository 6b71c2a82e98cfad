package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	runCalls       = 500  // figure 1
	runWarmup      = 20   // calls of each kind before measuring
	concClients    = 16   // figure 2
	concCalls      = 2000 // figure 2
	sectionTimeout = 45 * time.Second
)

// refRun runs cmd as the agent does, /bin/sh -c cmd, with both streams
// captured, and returns its stdout. It is the reference for /run: what a
// program spends to run the command itself with os/exec.
func refRun(cmd string) (string, error) {
	c := exec.Command("/bin/sh", "-c", cmd)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	return out.String(), err
}

// sectionRun measures figure 1: /run of `true`, one keep-alive client,
// against os/exec in this process. Agent and reference calls alternate so
// that drift in the machine's speed hits both alike. Two more kinds of
// call, also alternating, split the difference: the same /run from a
// minimal raw HTTP/1.1 client, and GET /health, a round trip that does no
// work.
func (b *bench) sectionRun(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	raw, err := dialRaw(a, http.MethodPost, "/run", []byte(`{"cmd":"true"}`))
	if err != nil {
		return err
	}
	defer raw.close()
	calls := []func() error{
		func() error { return checkRun(a.c.Run(ctx, client.Command{Cmd: "true"})) },
		func() error { return checkRun(decodeRun(raw.do())) },
		func() error { _, err := refRun("true"); return err },
		func() error { _, err := a.c.Health(ctx); return err },
	}
	gc0, _ := a.gcStats()
	lat, errs := alternate(ctx, runCalls, calls)
	if len(lat[0]) < runCalls {
		return fmt.Errorf("only %d of %d calls within the section's time", len(lat[0]), runCalls)
	}
	const ref = "os/exec sh -c true, output captured"
	refMed := ms(median(lat[2]))
	med := newFigure("1 /run", "`true` median", ms(median(lat[0])), "ms").withRef(refMed, ref).ratioAtMost(1.2)
	if errs.count() > 0 {
		med = med.withTarget("≤ 1.2× ref, no error", false).withNote("%s", errs.String())
	}
	b.rep.add(med)
	gc1, _ := a.gcStats()
	b.rep.add(newFigure("1 /run", "`true` p99", ms(percentile(lat[0], 99)), "ms").
		withRef(ms(percentile(lat[2], 99)), ref).
		withNote("the agent ran %d garbage collections during the %d /run calls of this section (gctrace)",
			gc1.cycles-gc0.cycles, 2*(runWarmup+runCalls)))
	b.rep.add(newFigure("1 /run", "`true` median, raw HTTP/1.1 client", ms(median(lat[1])), "ms").
		withRef(refMed, ref).withNote("one goroutine writes the request and reads the reply: no net/http Transport"))
	b.rep.add(newFigure("1 /run", "GET /health median (HTTP round trip, no work)", ms(median(lat[3])), "ms").
		withRef(refMed, ref).withNote("the part of the /run figure that any request costs on this machine"))
	return nil
}

// alternate times n calls of each of calls, after runWarmup untimed ones,
// one of each kind in turn, so that drift in the machine's speed hits
// every kind alike. It returns the latencies of each kind, fewer than n
// if ctx ended first, and the errors the calls returned.
func alternate(ctx context.Context, n int, calls []func() error) ([][]time.Duration, *errorList) {
	lat := make([][]time.Duration, len(calls))
	var errs errorList
	for i := 0; i < runWarmup+n && ctx.Err() == nil; i++ {
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
	return lat, &errs
}

// checkRun checks a /run reply of `true`.
func checkRun(r client.RunResult, err error) error {
	if err == nil && r.Code != 0 {
		err = fmt.Errorf("code %d, stderr %q", r.Code, r.Stderr)
	}
	return err
}

// decodeRun decodes the raw client's /run reply.
func decodeRun(b []byte, err error) (client.RunResult, error) {
	var r struct {
		Stdout, Stderr string
		Code           int
	}
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	return client.RunResult{Stdout: r.Stdout, Stderr: r.Stderr, Code: r.Code}, err
}

// sectionConcurrency measures figure 2: 16 clients share 2,000 /run calls
// of `echo hi`; every reply must be stdout "hi\n" and code 0. The
// reference is 16 goroutines running the same through os/exec.
func (b *bench) sectionConcurrency(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	var errs errorList
	agentCall := func() error {
		r, err := a.c.Run(ctx, client.Command{Cmd: "echo hi"})
		switch {
		case err != nil:
			return err
		case r.Stdout != "hi\n" || r.Code != 0:
			return fmt.Errorf("reply stdout %q code %d stderr %q", r.Stdout, r.Code, r.Stderr)
		}
		return nil
	}
	refCall := func() error {
		out, err := refRun("echo hi")
		if err == nil && out != "hi\n" {
			err = fmt.Errorf("stdout %q", out)
		}
		return err
	}
	agentLat, agentTime, done := fanOutCalls(ctx, concClients, concCalls, agentCall, &errs)
	var refErrs errorList
	refLat, refTime, _ := fanOutCalls(ctx, concClients, concCalls, refCall, &refErrs)
	if done < concCalls {
		errs.add("only %d of %d calls made within the section's time", done, concCalls)
	}
	const ref = "16 goroutines, os/exec"
	tput := float64(done) / agentTime.Seconds()
	b.rep.add(newFigure("2 /run×16", "`echo hi` throughput", tput, "calls/s").
		withRef(float64(concCalls)/refTime.Seconds(), ref))
	b.rep.add(newFigure("2 /run×16", "`echo hi` p99", ms(percentile(agentLat, 99)), "ms").
		withRef(ms(percentile(refLat, 99)), ref))
	f := newFigure("2 /run×16", "errors (of 2,000 checked replies)", float64(errs.count()), "errors").
		withTarget("0", errs.count() == 0)
	if errs.count() > 0 {
		f = f.withNote("%s", errs.String())
	}
	b.rep.add(f)
	if refErrs.count() > 0 {
		b.rep.setInfo("concurrency_reference_errors", refErrs.String())
	}
	return nil
}

// fanOutCalls makes calls calls of call from clients goroutines and
// returns every latency, the elapsed time and how many calls were made.
// Failed calls are added to errs.
func fanOutCalls(ctx context.Context, clients, calls int, call func() error, errs *errorList) ([]time.Duration, time.Duration, int) {
	var next atomic.Int64
	lats := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go callWorker(ctx, &wg, &next, int64(calls), call, errs, &lats[i])
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return all, elapsed, len(all)
}

// callWorker takes call numbers from next until calls are taken or ctx
// ends, and appends each call's latency to lat.
//
// callWorker runs in its own goroutine, one per client; it ends when every
// call has been taken or ctx has ended. wg is its owner's count.
func callWorker(ctx context.Context, wg *sync.WaitGroup, next *atomic.Int64, calls int64,
	call func() error, errs *errorList, lat *[]time.Duration) {
	defer wg.Done()
	for next.Add(1) <= calls && ctx.Err() == nil {
		t0 := time.Now()
		err := call()
		*lat = append(*lat, time.Since(t0))
		if err != nil {
			errs.add("%v", err)
		}
	}
}
