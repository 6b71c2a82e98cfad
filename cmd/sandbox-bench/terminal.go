package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	termKeystrokes = 300       // keystroke round trips of each kind
	termSeqLines   = 1_000_000 // seq 1 termSeqLines through a terminal
	termSeqRepeats = 5         // runs of each kind; the median is reported
	termPings      = 100       // WebSocket pings, for the round trip alone
	// termEcho is the program of the keystroke figure: cat on a terminal
	// in raw mode without echo, so a keystroke comes back only once cat
	// has read it and written it, as in an editor or a shell's line
	// editor, not from the kernel's own echo.
	termEcho = "stty raw -echo; echo ready; exec cat"
	// termSeq waits for a line, so that the client is attached and the
	// clock started before the first byte of output.
	termSeq = "read x; seq 1 1000000"
)

// sectionTerminal measures the terminal figures: the keystroke echo round
// trip through a terminal driven over /terminal_ws, and the output rate
// of seq 1 1000000 received by a WebSocket client; each against the same
// on a pseudo-terminal the bench opens itself.
func (b *bench) sectionTerminal(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	c, err := client.New(a.base, a.secret)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()

	agentRTT, ping, err := agentKeystrokes(ctx, c)
	if err != nil {
		return fmt.Errorf("keystrokes through the agent: %w", err)
	}
	localRTT, err := localKeystrokes(ctx)
	if err != nil {
		return fmt.Errorf("keystrokes on a local pseudo-terminal: %w", err)
	}
	med, local := median(agentRTT), median(localRTT)
	b.rep.add(newFigure("11 terminal", "keystroke echo round trip, median", us(med), "µs").
		withRef(us(local), "the same on a pseudo-terminal the bench opens").
		withNote("one byte typed into `%s`, until it comes back: client → WebSocket → agent → pty → cat → pty → "+
			"ring → WebSocket → client; %d each, p90 %.0f µs vs %.0f µs; a WebSocket ping alone (the round trip "+
			"the agent adds) takes %.0f µs, median of %d", termEcho, termKeystrokes,
			us(percentile(agentRTT, 90)), us(percentile(localRTT, 90)), us(median(ping)), termPings))

	var agentRate, localRate []float64
	var missed uint64
	for range termSeqRepeats {
		rate, m, err := agentSeq(ctx, c)
		if err != nil {
			return fmt.Errorf("seq through the agent: %w", err)
		}
		agentRate, missed = append(agentRate, rate), missed+m
		if rate, err = localSeq(ctx); err != nil {
			return fmt.Errorf("seq on a local pseudo-terminal: %w", err)
		}
		localRate = append(localRate, rate)
	}
	f := newFigure("11 terminal", "seq 1 1000000 output to a WebSocket client", medianFloat(agentRate), "MB/s").
		withRef(medianFloat(localRate), "read from a pseudo-terminal the bench opens")
	b.rep.add(f.ratioAtLeast(0.5).withNote("7.9 MB of output (the terminal turns \\n into \\r\\n) from the line that "+
		"starts seq to the exit message, median of %d; bytes the client fell too far behind for (missed), all runs: %d",
		termSeqRepeats, missed))
	return nil
}

// agentKeystrokes types termKeystrokes bytes, one at a time, into a
// terminal running termEcho and times each until it comes back; then
// times termPings WebSocket pings on the same connection.
func agentKeystrokes(ctx context.Context, c *client.Client) (rtt, ping []time.Duration, err error) {
	term, err := c.StartTerminal(ctx, client.TerminalOptions{Cmd: termEcho})
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = c.KillTerminal(context.WithoutCancel(ctx), term.ID, "") }()
	tc, err := c.AttachTerminal(ctx, term.ID, -1)
	if err != nil {
		return nil, nil, err
	}
	defer tc.Close()
	var got []byte
	read := func(until func([]byte) bool) error {
		for !until(got) {
			ev, err := tc.Read(ctx)
			if err != nil {
				return err
			}
			if ev.Exit != nil || ev.Missed > 0 {
				return fmt.Errorf("unexpected event %+v", ev)
			}
			got = append(got, ev.Output...)
		}
		return nil
	}
	if err := read(func(b []byte) bool { return bytes.Contains(b, []byte("ready\n")) }); err != nil {
		return nil, nil, err
	}
	for i := range termKeystrokes {
		key := []byte{'a' + byte(i%26)}
		got = got[:0]
		start := time.Now()
		if err := tc.Write(ctx, key); err != nil {
			return nil, nil, err
		}
		if err := read(func(b []byte) bool { return len(b) > 0 }); err != nil {
			return nil, nil, err
		}
		rtt = append(rtt, time.Since(start))
		if !bytes.Equal(got, key) {
			return nil, nil, fmt.Errorf("typed %q, got %q back", key, got)
		}
	}
	ping, err = pingTerminal(ctx, tc)
	return rtt, ping, err
}

// pingTerminal times termPings pings on tc while a goroutine reads, as a
// pong needs.
func pingTerminal(ctx context.Context, tc *client.TerminalConn) ([]time.Duration, error) {
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // reads, and so takes the pongs, until stopped
		defer wg.Done()
		for {
			if _, err := tc.Read(rctx); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer stop()
	var ds []time.Duration
	for range termPings {
		start := time.Now()
		if err := tc.Ping(ctx); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(start))
	}
	return ds, nil
}

// localPTY starts sh -c cmd on a pseudo-terminal of the bench's own and
// returns it with its master.
func localPTY(cmd string) (*exec.Cmd, *os.File, error) {
	c := exec.Command("/bin/sh", "-c", cmd)
	master, err := pty.StartWithSize(c, &pty.Winsize{Cols: 80, Rows: 24})
	return c, master, err
}

// localKeystrokes is agentKeystrokes on a pseudo-terminal of the bench's
// own, read and written directly.
func localKeystrokes(ctx context.Context) ([]time.Duration, error) {
	c, master, err := localPTY(termEcho)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		master.Close()
	}()
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte("ready\n")) {
		n, err := master.Read(buf)
		if err != nil {
			return nil, err
		}
		got = append(got, buf[:n]...)
	}
	var rtt []time.Duration
	for i := 0; i < termKeystrokes && ctx.Err() == nil; i++ {
		key := []byte{'a' + byte(i%26)}
		start := time.Now()
		if _, err := master.Write(key); err != nil {
			return nil, err
		}
		n, err := master.Read(buf)
		if err != nil {
			return nil, err
		}
		rtt = append(rtt, time.Since(start))
		if !bytes.Equal(buf[:n], key) {
			return nil, fmt.Errorf("typed %q, got %q back", key, buf[:n])
		}
	}
	return rtt, ctx.Err()
}

// termSeqBytes is what termSeq prints on a terminal after the typed
// line's echo: every "\n" becomes "\r\n".
var termSeqBytes = func() int {
	n := 0
	for i := 1; i <= termSeqLines; i++ {
		n += len(fmt.Sprint(i)) + 2
	}
	return n
}()

// agentSeq runs termSeq in a terminal and returns the rate at which a
// WebSocket client received its output, in MB/s, and how many bytes it
// missed.
func agentSeq(ctx context.Context, c *client.Client) (rate float64, missed uint64, err error) {
	term, err := c.StartTerminal(ctx, client.TerminalOptions{Cmd: termSeq})
	if err != nil {
		return 0, 0, err
	}
	tc, err := c.AttachTerminal(ctx, term.ID, -1)
	if err != nil {
		return 0, 0, err
	}
	defer tc.Close()
	start := time.Now()
	if err := tc.Write(ctx, []byte("\n")); err != nil {
		return 0, 0, err
	}
	var received int
	var last []byte
	for {
		ev, err := tc.Read(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		received += len(ev.Output)
		missed += ev.Missed
		if len(ev.Output) > 0 {
			last = ev.Output
		}
	}
	d := time.Since(start)
	want := termSeqBytes + 2 // and the typed line's echo
	if got := uint64(received) + missed; got != uint64(want) || !strings.HasSuffix(string(last), "1000000\r\n") {
		return 0, 0, fmt.Errorf("%d bytes received and %d missed, want %d in all ending in 1000000", received, missed, want)
	}
	return float64(want) / 1e6 / d.Seconds(), missed, nil
}

// localSeq runs termSeq on a pseudo-terminal of the bench's own and
// returns the rate at which it read the output from the master, in MB/s.
func localSeq(ctx context.Context) (float64, error) {
	c, master, err := localPTY(termSeq)
	if err != nil {
		return 0, err
	}
	defer master.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // the bench's copy of the agent's kill on ctx
		select {
		case <-ctx.Done():
			_ = c.Process.Kill()
		case <-done:
		}
	}()
	start := time.Now()
	if _, err := master.Write([]byte("\n")); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, master)
	d := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		return 0, fmt.Errorf("reading the pseudo-terminal: %v", err)
	}
	if err := c.Wait(); err != nil {
		return 0, err
	}
	if want := termSeqBytes + 2; n != int64(want) {
		return 0, fmt.Errorf("%d bytes, want %d", n, want)
	}
	return float64(n) / 1e6 / d.Seconds(), nil
}
