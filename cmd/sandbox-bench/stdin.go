package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	stdinBytes   = 100 << 20 // figure 15: bytes sent through /write_stdin
	stdinRepeats = 7         // runs of each kind; the median is reported
	// stdinChunkedRepeats is how many of the runs also send the bytes
	// chunked, for the informational figure of the copy path.
	stdinChunkedRepeats = 3
	stdinTarget         = 0.5 // the ratio to a local pipe the issue asks for
)

// sectionStdin measures figure 15: 100 MiB sent with the raw form of
// /write_stdin (client.WriteStdin, with a Content-Length) into `wc -c`, from the start
// of the request to wc's count read from the process's log, against the
// same bytes written into `wc -c` through a local pipe. Both wc processes
// are started before the clock starts.
func (b *bench) sectionStdin(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	c := a.c
	var agentRate, pipeRate, chunkedRate []float64
	var wall, agentCPU, clientCPU time.Duration
	for i := range stdinRepeats {
		if i < stdinChunkedRepeats {
			d, err := stdinThroughAgent(ctx, c, struct{ io.Reader }{newPattern(stdinBytes)})
			if err != nil {
				return err
			}
			chunkedRate = append(chunkedRate, stdinBytes/d.Seconds()/(1<<20))
		}
		cpu0, self0 := a.cpuTime(), selfCPU()
		d, err := stdinThroughAgent(ctx, c, newPattern(stdinBytes))
		if err != nil {
			return err
		}
		wall, agentCPU, clientCPU = wall+d, agentCPU+a.cpuTime()-cpu0, clientCPU+selfCPU()-self0
		agentRate = append(agentRate, stdinBytes/d.Seconds()/(1<<20))
		if d, err = stdinThroughPipe(ctx); err != nil {
			return err
		}
		pipeRate = append(pipeRate, stdinBytes/d.Seconds()/(1<<20))
	}
	f := newFigure("15 /write_stdin", "100 MiB raw body into wc -c", medianFloat(agentRate), "MiB/s").
		withRef(medianFloat(pipeRate), "the same bytes through a local pipe into wc -c").ratioAtLeast(stdinTarget)
	b.rep.add(f.withNote("spliced by the agent; over the %d runs: wall %.0f ms, agent CPU %.0f ms, client CPU %.0f ms; wc's count checked",
		stdinRepeats, ms(wall), ms(agentCPU), ms(clientCPU)))
	b.rep.add(newFigure("15 /write_stdin", "the same, chunked (copied, not spliced)", medianFloat(chunkedRate), "MiB/s").
		withRef(medianFloat(pipeRate), "local pipe").withNote("a body of unknown length, median of %d", stdinChunkedRepeats))
	return nil
}

// stdinThroughAgent starts `wc -c` with stdin kept open, then times the
// write of data (stdinBytes), the close and the arrival of wc's count.
func stdinThroughAgent(ctx context.Context, c *client.Client, data io.Reader) (time.Duration, error) {
	p, err := c.StartProcess(ctx, client.Command{Cmd: "wc -c", Stdin: true})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := c.WriteStdin(ctx, p.ID, data)
	if err != nil {
		return 0, fmt.Errorf("write_stdin after %d bytes: %w", n, err)
	}
	if err := c.CloseStdin(ctx, p.ID); err != nil {
		return 0, err
	}
	var count string
	for ev, err := range c.ProcessLogs(ctx, p.ID, client.LogsOptions{}) {
		if err != nil {
			return 0, err
		}
		if ev.Type == client.EventLog {
			count = string(ev.Data)
			break
		}
	}
	d := time.Since(start)
	return d, checkCount(count)
}

// stdinThroughPipe writes the same bytes into a local `wc -c` through a
// pipe, with the copy buffer the agent uses.
func stdinThroughPipe(ctx context.Context) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "wc", "-c")
	w, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	start := time.Now()
	_, err = io.CopyBuffer(w, newPattern(stdinBytes), make([]byte, 256<<10))
	w.Close()
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	return d, checkCount(out.String())
}

func checkCount(s string) error {
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err != nil || n != stdinBytes {
		return fmt.Errorf("wc -c counted %q, want %d", s, stdinBytes)
	}
	return nil
}

// newPattern returns a reader of n bytes of a fixed non-trivial pattern,
// from a block allocated once. It is an io.SectionReader, whose length
// client.WriteStdin sends as the Content-Length, as curl --data-binary
// @file does, so the agent splices it.
func newPattern(n int64) *io.SectionReader {
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i>>9)
	}
	return io.NewSectionReader(patternAt(block), 0, n)
}

// patternAt is an endless repetition of its block, read at any offset.
type patternAt []byte

func (p patternAt) ReadAt(b []byte, off int64) (int, error) {
	total := 0
	for len(b) > 0 {
		c := copy(b, p[off%int64(len(p)):])
		b = b[c:]
		off += int64(c)
		total += c
	}
	return total, nil
}
