package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/sandbox-executor/sandbox-executor/internal/eventjson"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	stalledLines   = 1_000_000 // figure 5: seq 1 stalledLines
	stalledRepeats = 7         // pairs of runs: without reader, with a stalled one
	ringBoundMiB   = 8.0       // procs.Options.MaxBytes default
	pollEvery      = 5 * time.Millisecond
	processTimeout = 30 * time.Second
	gateDelay      = 50 * time.Millisecond // time for the stalled reader to subscribe
)

// stalledRun is one run of figure 5.
type stalledRun struct {
	dur       time.Duration // from the gate's opening to completed_at
	rssBefore float64       // MiB, just before the start
	rssPeak   float64       // MiB, the most seen until shortly after completion
	firstLine string        // the stalled reader's first event, read afterwards
}

// sectionStalled measures figure 5 on a fresh agent: how long seq 1
// 1000000 takes with no reader and with a reader that never reads, and how
// much the agent's RSS grows meanwhile. Runs alternate.
func (b *bench) sectionStalled(ctx context.Context) error {
	a, err := startAgent(ctx, b.bin)
	if err != nil {
		return err
	}
	defer a.stop()
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var free, stalled []float64
	growth, firstLine := 0.0, ""
	for i := range stalledRepeats {
		r, err := runStalled(ctx, a, dir, 2*i, false)
		if err != nil {
			return err
		}
		free = append(free, ms(r.dur))
		if r, err = runStalled(ctx, a, dir, 2*i+1, true); err != nil {
			return err
		}
		stalled = append(stalled, ms(r.dur))
		growth = max(growth, r.rssPeak-r.rssBefore)
		firstLine = cmp.Or(firstLine, r.firstLine)
	}
	b.rep.add(newFigure("5 stalled reader", "seq 1 1000000 run time", medianFloat(stalled), "ms").
		withRef(medianFloat(free), "no reader").ratioAtMost(1.2).
		// The note shows the reader was there from the start: one that
		// subscribed after the run would begin with ~990,000 missed.
		withNote("median of %d; the stalled reader's stream began with %q (read after the run)",
			stalledRepeats, firstLine))
	b.rep.add(newFigure("5 stalled reader", "agent RSS growth during the run", growth, "MiB").
		withTarget(fmt.Sprintf("≤ %.0f MiB (ring bound)", ringBoundMiB), growth <= ringBoundMiB).
		withNote("peak VmRSS while the process ran and 200 ms after, minus VmRSS before it; worst of %d", stalledRepeats))
	return nil
}

// runStalled starts seq 1 stalledLines behind a gate, connects a stalled
// reader if stall, opens the gate and waits until list_processes shows
// the process completed. The gate (a FIFO the command reads first) is what
// lets the reader subscribe before the first line: seq prints the 10,000
// lines a ring holds in about a millisecond. The run time is from the
// gate's opening to the agent's completed_at, on the same clock.
func runStalled(ctx context.Context, a *agent, dir string, n int, stall bool) (stalledRun, error) {
	r := stalledRun{rssBefore: a.rssMiB()}
	gate := filepath.Join(dir, "gate-"+strconv.Itoa(n))
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		return r, err
	}
	defer os.Remove(gate)
	id, err := a.startProcess(ctx, fmt.Sprintf("read x < %s; exec seq 1 %d", gate, stalledLines))
	if err != nil {
		return r, err
	}
	var conn net.Conn
	if stall {
		if conn, err = stalledReader(a, id); err != nil {
			return r, err
		}
		defer conn.Close() // only now does the agent's handler see the client go
	}
	time.Sleep(gateDelay) // the same for both kinds of run
	opened, err := openGate(gate)
	if err != nil {
		return r, err
	}
	r.rssPeak = r.rssBefore
	info, err := waitFinished(ctx, a, id, func() { r.rssPeak = max(r.rssPeak, a.rssMiB()) })
	if err != nil {
		return r, err
	}
	if info.Status != client.StatusCompleted {
		return r, fmt.Errorf("process %s: %s", id, info.Status)
	}
	if info.CompletedAt.IsZero() {
		return r, fmt.Errorf("process %s: no completed_at", id)
	}
	r.dur = info.CompletedAt.Sub(opened)
	if stall {
		// The handler may still be blocked holding a batch: look once more.
		time.Sleep(200 * time.Millisecond)
		r.rssPeak = max(r.rssPeak, a.rssMiB())
		var missed int64
		if r.firstLine, missed, err = firstEvent(conn); err != nil {
			return r, err
		}
		if missed > stalledLines/10 {
			return r, fmt.Errorf("stalled reader's stream begins with %q: it subscribed too late to count", r.firstLine)
		}
	}
	return r, nil
}

// openGate opens the FIFO at path for writing once the command has opened
// it for reading, writes a line, and returns when it did.
func openGate(path string) (time.Time, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err == nil {
			opened := time.Now()
			_, err = syscall.Write(fd, []byte("go\n"))
			syscall.Close(fd)
			return opened, err
		}
		// ENXIO: the command has not opened its end yet.
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("opening the gate %s: %w", path, err)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// stalledReader connects, sends the log request and never reads until the
// run is over.
func stalledReader(a *agent, id string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", a.apiAddr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := "GET /process_logs_streaming?id=" + url.QueryEscape(id) + " HTTP/1.1\r\n" +
		"Host: " + a.apiAddr + "\r\nAuthorization: Bearer " + a.secret + "\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// firstEvent reads the start of the stalled stream, after the run, and
// returns its first event line and how many lines the reader had missed
// before it: 0 if the stream begins with id: 1, else the count of the
// missed event it begins with. A reader that subscribed only after the
// run would have missed nearly all of it.
func firstEvent(conn net.Conn) (string, int64, error) {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		return "", 0, err
	}
	if !strings.Contains(status, " 200 ") {
		return "", 0, fmt.Errorf("stalled reader: %q", strings.TrimSpace(status))
	}
	for range 64 {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", 0, err
		}
		switch line = strings.TrimSpace(line); {
		case line == "id: 1":
			return line, 0, nil
		case line == "event: missed":
			data, err := br.ReadString('\n')
			if err != nil {
				return "", 0, err
			}
			var f eventjson.Fields
			if err := f.Decode([]byte(strings.TrimPrefix(strings.TrimSpace(data), "data: "))); err != nil {
				return "", 0, err
			}
			return line + " " + strconv.FormatInt(f.Missed, 10), f.Missed, nil
		case strings.HasPrefix(line, "id: "), strings.HasPrefix(line, "event: "):
			return line, -1, fmt.Errorf("stalled reader: unexpected first event line %q", line)
		}
	}
	return "", 0, errors.New("stalled reader: no event in the first lines")
}

// waitFinished polls list_processes until process id has left running,
// calling sample at each poll.
func waitFinished(ctx context.Context, a *agent, id string, sample func()) (client.Process, error) {
	deadline := time.Now().Add(processTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sample()
		ps, err := a.c.ListProcesses(ctx)
		if err != nil {
			return client.Process{}, err
		}
		for _, p := range ps {
			if p.ID == id && p.Status != client.StatusRunning {
				return p, nil
			}
		}
		time.Sleep(pollEvery)
	}
	return client.Process{}, fmt.Errorf("process %s still running after %s", id, processTimeout)
}
