package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Figures 9 and 10 check that the agent's memory has a ceiling that does
// not grow with what clients do: many processes with a lot of output, and
// many concurrent heavy replies.
const (
	ceilingProcs     = 500   // figure 9: running background processes
	ceilingLineBytes = 1000  // each prints lines of this size, newline included,
	ceilingLines     = 9_000 // this many: 9 MB, more than one process's ring holds
	ceilingStarters  = 8     // clients starting the processes
	// ringBudgetMiB is the default of the total byte budget for all
	// processes' rings, which branch h8-procs adds (procs.Options).
	ringBudgetMiB = 128
	// ringBudgetRatio bounds figure 9's RSS, in budgets: one for the
	// retained lines, one more for the garbage Go's collector lets
	// accumulate (GOGC=100), and one for 500 processes' pipes, buffers and
	// goroutines.
	ringBudgetRatio = 3

	readFileMiB = 63 // figure 10: the file, under read_file's 64 MiB limit
	readClients = 32 // concurrent read_file calls of it
	// readPeakTargetMiB bounds figure 10's peak RSS: a ceiling that does
	// not grow with the number of clients. A streamed reply needs far
	// less; a limit of one or two whole replies at a time fits.
	readPeakTargetMiB = 256

	ceilingTimeout = 40 * time.Second // each of figures 9 and 10
	ceilingSettle  = 10 * time.Second // the longest wait for the agent to finish reading figure 9's output
	// safetyCapMiB is the most RSS an agent may reach before the bench
	// kills it, so that a figure without a ceiling ends in a MISS and not
	// in the machine's OOM killer. Half the available memory if that is
	// less.
	safetyCapMiB  = 2 << 10
	rssWatchEvery = 2 * time.Millisecond
)

// sectionRingBudget measures figure 9 on a fresh agent: its RSS once 500
// running background processes have each printed 9 MB and gone to sleep,
// beside the total ring budget.
func (b *bench) sectionRingBudget(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ceilingTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandbox-bench-procs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The caps on running commands and background processes must be above
	// ceilingProcs: their defaults come from the open-file limit (an
	// eighth of it), which may be low where the bench runs.
	caps := []string{"-max-processes", "1000", "-max-commands", "1200"}
	a, err := startAgentArgs(ctx, b.bin, caps, gcTrace)
	if err != nil {
		return err
	}
	token := sleepToken()
	// On every path: the agent kills its process groups when it stops;
	// whatever is left is killed here.
	defer killByToken(token)
	defer a.stop()
	figs, err := measureRingBudget(ctx, a, dir, token)
	if err != nil {
		return err
	}
	a.stop()
	left := killByToken(token)
	for _, f := range figs {
		b.rep.add(f.withNote("%s; %d of the processes were left running after the agent stopped (killed by the bench)",
			f.Note, left))
	}
	return nil
}

// measureRingBudget starts the processes of figure 9 on a, waits until
// they have printed, and returns the figures. An agent killed at the
// safety cap still gets its figures, marked as such.
func measureRingBudget(ctx context.Context, a *agent, dir, token string) ([]figure, error) {
	time.Sleep(idleSettle)
	idle, limit := a.rssMiB(), safetyCap()
	watch := startRSSWatch(a, limit)
	defer watch.stop()
	start := time.Now()
	var printed time.Duration
	err := startPrinters(ctx, a, dir, token)
	started := time.Since(start)
	if err == nil {
		printed, err = waitMarkers(ctx, a, dir, ceilingProcs)
	}
	settled := err == nil && waitIdleCPU(ctx, a)
	took := time.Since(start)
	rss := a.rssMiB()
	peak, killed := watch.stop()
	if err != nil && !killed {
		return nil, err
	}
	hwm := vmHWM(a, peak)
	gc, _ := a.gcStats()
	note := fmt.Sprintf("%d processes printing %d × %d-byte lines each; RSS at idle %.1f MiB; "+
		"Go heap at the last GC: %.0f MB live, next GC at %.0f MB (gctrace)",
		ceilingProcs, ceilingLines, ceilingLineBytes, idle, gc.liveMB, gc.goalMB)
	switch {
	case killed:
		rss = peak
		note += fmt.Sprintf("; KILLED by the bench %.1f s after the first start, at the safety cap of %.0f MiB: "+
			"the true figure is higher", took.Seconds(), limit)
	case !settled:
		note += "; the agent was still busy when measured"
	default:
		note += fmt.Sprintf("; all started in %.1f s, all printed %.1f s later, the agent idle again %.1f s after the first start",
			started.Seconds(), printed.Seconds(), took.Seconds())
	}
	ref := fmt.Sprintf("ring budget (default %d MiB)", ringBudgetMiB)
	return []figure{
		newFigure("9 ceilings", "RSS, 500 running procs that printed 9 MB each", rss, "MiB").
			withRef(ringBudgetMiB, ref).ratioAtMost(ringBudgetRatio).withNote("VmRSS once printed; %s", note),
		newFigure("9 ceilings", "peak RSS while they printed", hwm, "MiB").
			withRef(ringBudgetMiB, ref).ratioAtMost(ringBudgetRatio).withNote("VmHWM"),
	}, nil
}

// startPrinters starts ceilingProcs background processes from
// ceilingStarters clients. Each prints its 9 MB, writes its pid to a
// marker file in dir, and sleeps with token as its argument, which tells
// its processes from everyone else's.
func startPrinters(ctx context.Context, a *agent, dir, token string) error {
	line := strings.Repeat("x", ceilingLineBytes-1)
	var next atomic.Int64
	var errs errorList
	call := func() error {
		i := next.Add(1)
		// set -e: if the agent goes, the broken pipe ends the shell
		// instead of letting it go on to the sleep.
		marker := filepath.Join(dir, strconv.FormatInt(i, 10))
		cmd := fmt.Sprintf("set -e; yes %s | head -n %d; echo $$ > %s.tmp; mv %s.tmp %s; exec sleep %s",
			line, ceilingLines, marker, marker, marker, token)
		_, err := a.startProcess(ctx, cmd)
		return err
	}
	if _, _, n := fanOutCalls(ctx, ceilingStarters, ceilingProcs, call, &errs); n < ceilingProcs {
		return fmt.Errorf("started %d of %d processes in time", n, ceilingProcs)
	}
	if errs.count() > 0 {
		return fmt.Errorf("start_process: %s (if it is the agent's cap on processes, set procCapFlag)", errs.String())
	}
	return nil
}

// waitMarkers waits until dir holds n marker files and returns how long
// that took. It gives up if a exits.
func waitMarkers(ctx context.Context, a *agent, dir string, n int) (time.Duration, error) {
	start := time.Now()
	for ctx.Err() == nil {
		select {
		case <-a.done:
			return 0, errors.New("agent exited while its processes printed")
		default:
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		done := 0
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".tmp") {
				done++
			}
		}
		if done >= n {
			return time.Since(start), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("processes still printing: %w", ctx.Err())
}

// waitIdleCPU waits until the agent has used at most one clock tick of
// CPU in each of two consecutive 100 ms periods, at most ceilingSettle:
// the processes have written everything, but the agent may still be
// reading the last of it from the pipes. It reports whether the agent
// went idle.
func waitIdleCPU(ctx context.Context, a *agent) bool {
	deadline := time.Now().Add(ceilingSettle)
	last, quiet := a.cpuTime(), 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		now := a.cpuTime()
		if now-last <= 10*time.Millisecond {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= 2 {
			return true
		}
		last = now
	}
	return false
}

// sleepToken returns an argument for sleep that is a long duration and
// unique to this run, such as 3600.123456.
func sleepToken() string {
	return fmt.Sprintf("3600.%06d", rand.IntN(1_000_000))
}

// killByToken kills, with SIGKILL, every process whose command line
// contains token: the sleeps of figure 9 and their shells before they
// exec it. It returns how many it found.
func killByToken(token string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(token)) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// sectionReadFile measures figure 10 on a fresh agent: its peak RSS while
// 32 clients read_file the same 63 MiB file at once, beside 32 times the
// file's size, which is what building every reply whole costs at least.
func (b *bench) sectionReadFile(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ceilingTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandbox-bench-read-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "63mib.txt")
	size := int64(readFileMiB) << 20
	if err := writeTextFile(path, size); err != nil {
		return err
	}
	a, err := startAgent(ctx, b.bin, gcTrace)
	if err != nil {
		return err
	}
	defer a.stop()
	time.Sleep(idleSettle)
	idle, limit := a.rssMiB(), safetyCap()
	watch := startRSSWatch(a, limit)
	defer watch.stop()

	body, _ := json.Marshal(map[string]string{"path": path})
	var errs errorList
	var wg sync.WaitGroup
	start := time.Now()
	for range readClients {
		wg.Add(1)
		go readFileClient(ctx, &wg, a, body, size, &errs)
	}
	wg.Wait()
	took := time.Since(start)
	peak, killed := watch.stop()
	hwm := vmHWM(a, peak)
	note := fmt.Sprintf("VmHWM (RSS at idle %.1f MiB); %d clients read the file in %.1f s", idle, readClients, took.Seconds())
	if killed {
		note += fmt.Sprintf("; KILLED by the bench at the safety cap of %.0f MiB: the true peak is higher", limit)
	} else if errs.count() > 0 {
		note += "; " + errs.String()
	}
	b.rep.add(newFigure("10 ceilings", "peak RSS, 32 concurrent read_file of 63 MiB", hwm, "MiB").
		withRef(float64(readClients*readFileMiB), "32 × the file's size").
		withTarget(fmt.Sprintf("≤ %d MiB", readPeakTargetMiB), hwm <= readPeakTargetMiB && !killed && errs.count() == 0).
		withNote("%s", note))
	return nil
}

// readFileClient calls read_file once with body and checks that the
// reply is a 200 holding at least size bytes, which it reads and discards.
//
// readFileClient runs in its own goroutine, one per client; it ends when
// the reply has been read or has failed. wg is its owner's count.
func readFileClient(ctx context.Context, wg *sync.WaitGroup, a *agent, body []byte, size int64, errs *errorList) {
	defer wg.Done()
	req, err := a.request(ctx, http.MethodPost, "/read_file", body)
	if err != nil {
		errs.add("%v", err)
		return
	}
	resp, err := a.hc.Do(req) // raw: the figure is the agent's memory, and the reply is only counted
	if err != nil {
		errs.add("read_file: %v", err)
		return
	}
	defer resp.Body.Close()
	prefix := make([]byte, len(`{"content":"`))
	if _, err := io.ReadFull(resp.Body, prefix); err != nil {
		errs.add("read_file: %s: %v", resp.Status, err)
		return
	}
	n, err := io.Copy(io.Discard, resp.Body)
	switch {
	case err != nil:
		errs.add("read_file: %v", err)
	case resp.StatusCode != http.StatusOK:
		errs.add("read_file: %s: %s", resp.Status, prefix)
	case int64(len(prefix))+n < size:
		errs.add("read_file: %d bytes, want at least %d", int64(len(prefix))+n, size)
	}
}

// writeTextFile writes size bytes of ASCII lines to path: text that JSON
// carries as it is, with no escaping and no base64.
func writeTextFile(path string, size int64) error {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 'x'
		if i%ceilingLineBytes == ceilingLineBytes-1 {
			chunk[i] = '\n'
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for written := int64(0); written < size; written += int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), size-written)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
