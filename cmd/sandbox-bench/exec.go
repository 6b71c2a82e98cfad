package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	execOutBytes  = 1 << 30 // figure 17: bytes a command writes through /exec_ws
	execRepeats   = 3       // runs of each kind; the median is reported
	execOutTarget = 0.5     // exec's output rate, to a local pipe's
	execInTarget  = 0.9     // exec -i's input rate, to /write_stdin raw's
	// execFrame is the stdin frame the bench sends: the agent takes frames
	// of up to 1 MiB.
	execFrame = 256 << 10
	// cliFeed is the size of the bench's writes into the CLI's stdin pipe.
	cliFeed = 1 << 20
)

// sectionExec measures figure 17: a command's output through /exec_ws
// (head -c 1 GiB of /dev/zero, every byte read by the client) against
// the same command's output read from a local pipe; and 100 MiB into
// wc -c's stdin, on the exec's raw side channel (as a Go program sends it,
// and through the binary's `exec -i` from a pipe), on its WebSocket
// channel 0, and as figure 15's /write_stdin raw form, measured again
// here, in the same run, as the reference.
func (b *bench) sectionExec(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*sectionTimeout)
	defer cancel()
	var outRate, pipeRate, inRate, rawRate, cliRate, fileRate, frameRate []float64
	// CPU spent by the agent and by this client (the bench), per kind of
	// run: rates on a shared machine vary with its load, the work done per
	// byte does not, and it says which end a miss is made of.
	var outCPU, inCPU, rawCPU, cliCPU, fileCPU, frameCPU cpuSpent
	file, err := patternFile()
	if err != nil {
		return err
	}
	defer os.Remove(file)
	for range execRepeats {
		outCPU.start(a)
		d, err := execOutput(ctx, a.c)
		if err != nil {
			return err
		}
		outCPU.stop(a)
		outRate = append(outRate, execOutBytes/d.Seconds()/(1<<30))
		if d, err = pipeOutput(ctx); err != nil {
			return err
		}
		pipeRate = append(pipeRate, execOutBytes/d.Seconds()/(1<<30))
		inCPU.start(a)
		if d, err = execInput(ctx, a.c, true); err != nil {
			return err
		}
		inCPU.stop(a)
		inRate = append(inRate, stdinBytes/d.Seconds()/(1<<20))
		cliCPU.start(a)
		var cli time.Duration
		if d, cli, err = cliInput(ctx, b.bin, a, ""); err != nil {
			return err
		}
		cliCPU.stop(a)
		cliCPU.client += cli // the CLI's own; the bench only fed its pipe
		cliRate = append(cliRate, stdinBytes/d.Seconds()/(1<<20))
		fileCPU.start(a)
		if d, cli, err = cliInput(ctx, b.bin, a, file); err != nil {
			return err
		}
		fileCPU.stop(a)
		fileCPU.client += cli
		fileRate = append(fileRate, stdinBytes/d.Seconds()/(1<<20))
		frameCPU.start(a)
		if d, err = execInput(ctx, a.c, false); err != nil {
			return err
		}
		frameCPU.stop(a)
		frameRate = append(frameRate, stdinBytes/d.Seconds()/(1<<20))
		rawCPU.start(a)
		if d, err = stdinThroughAgent(ctx, a.c, newPattern(stdinBytes)); err != nil {
			return err
		}
		rawCPU.stop(a)
		rawRate = append(rawRate, stdinBytes/d.Seconds()/(1<<20))
	}
	const outGiB, inGiB = execRepeats * execOutBytes / (1 << 30), execRepeats * stdinBytes / float64(1<<30)
	b.rep.add(newFigure("17 exec", "head -c 1 GiB /dev/zero through /exec_ws to a client", medianFloat(outRate), "GiB/s").
		withRef(medianFloat(pipeRate), "the same command read through a local pipe").ratioAtLeast(execOutTarget).
		withNote("median of %d; every byte counted; CPU per GiB: agent %s, client %s",
			execRepeats, outCPU.agentPer(outGiB), outCPU.clientPer(outGiB)))
	const ref = "figure 15's /write_stdin raw body, in this run"
	b.rep.add(newFigure("17 exec", "exec -i: 100 MiB on the raw stdin side channel into wc -c", medianFloat(inRate), "MiB/s").
		withRef(medianFloat(rawRate), ref).ratioAtLeast(execInTarget).
		withNote("median of %d; client.SendStdin of a reader of known length, spliced by the agent; wc's count checked; CPU per GiB: agent %s, client %s (/write_stdin raw: agent %s, client %s)",
			execRepeats, inCPU.agentPer(inGiB), inCPU.clientPer(inGiB), rawCPU.agentPer(inGiB), rawCPU.clientPer(inGiB)))
	b.rep.add(newFigure("17 exec", "sandbox-executor exec -i: 100 MiB from a pipe into wc -c", medianFloat(cliRate), "MiB/s").
		withRef(medianFloat(rawRate), ref).ratioAtLeast(execInTarget).
		withNote("median of %d; the binary's exec -i, its stdin a pipe fed %d KiB at a time: chunked on the side channel, each chunk spliced by the agent; CPU per GiB: agent %s, the CLI %s",
			execRepeats, cliFeed>>10, cliCPU.agentPer(inGiB), cliCPU.clientPer(inGiB)))
	b.rep.add(newFigure("17 exec", "sandbox-executor exec -i: a 100 MiB file into wc -c", medianFloat(fileRate), "MiB/s").
		withRef(medianFloat(rawRate), ref).
		withNote("median of %d; the binary's exec -i, its stdin a regular file: sent with its length by sendfile(2), spliced by the agent; CPU per GiB: agent %s, the CLI %s",
			execRepeats, fileCPU.agentPer(inGiB), fileCPU.clientPer(inGiB)))
	b.rep.add(newFigure("17 exec", "exec -i: 100 MiB on the WebSocket stdin channel into wc -c", medianFloat(frameRate), "MiB/s").
		withRef(medianFloat(rawRate), ref).
		withNote("median of %d; frames of %d KiB, masked, unmasked and copied by the agent (what an agent without the side channel gets); CPU per GiB: agent %s, client %s",
			execRepeats, execFrame>>10, frameCPU.agentPer(inGiB), frameCPU.clientPer(inGiB)))
	return nil
}

// cpuSpent sums the CPU time the agent and the bench spent over runs.
type cpuSpent struct {
	agent, client, agent0, client0 time.Duration
}

func (c *cpuSpent) start(a *agent) { c.agent0, c.client0 = a.cpuTime(), selfCPU() }

func (c *cpuSpent) stop(a *agent) {
	c.agent += a.cpuTime() - c.agent0
	c.client += selfCPU() - c.client0
}

// agentPer and clientPer say the CPU time per GiB moved, in seconds
// (clock ticks are 10 ms: a sum over several runs is meant).
func (c *cpuSpent) agentPer(gib float64) string { return fmt.Sprintf("%.2f s", c.agent.Seconds()/gib) }
func (c *cpuSpent) clientPer(gib float64) string {
	return fmt.Sprintf("%.2f s", c.client.Seconds()/gib)
}

// execOutput times a command writing execOutBytes over /exec_ws, from the
// request to the exit, every byte read.
func execOutput(ctx context.Context, c *client.Client) (time.Duration, error) {
	start := time.Now()
	x, err := c.Exec(ctx, client.ExecOptions{Cmd: "head -c " + strconv.Itoa(execOutBytes) + " /dev/zero"})
	if err != nil {
		return 0, err
	}
	defer x.Close()
	var n int64
	for {
		ev, err := x.Read(ctx)
		if err != nil {
			return 0, fmt.Errorf("exec after %d bytes: %w", n, err)
		}
		if ev.Exit != nil {
			if ev.Exit.Code != 0 || n != execOutBytes {
				return 0, fmt.Errorf("exec: code %d after %d bytes", ev.Exit.Code, n)
			}
			return time.Since(start), nil
		}
		n += int64(len(ev.Data))
	}
}

// pipeOutput times the same command run here, read through a pipe.
func pipeOutput(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "head", "-c", strconv.Itoa(execOutBytes), "/dev/zero")
	r, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(io.Discard, r, make([]byte, 64<<10))
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err == nil && n != execOutBytes {
		err = fmt.Errorf("local pipe: %d bytes", n)
	}
	return time.Since(start), err
}

// execInput times stdinBytes sent into wc -c, from the request to wc's
// count: on the exec's side channel if side, else on channel 0.
func execInput(ctx context.Context, c *client.Client, side bool) (time.Duration, error) {
	start := time.Now()
	x, err := c.Exec(ctx, client.ExecOptions{Cmd: "wc -c", Stdin: true, StdinRaw: side})
	if err != nil {
		return 0, err
	}
	defer x.Close()
	sent := make(chan error, 1)
	if side {
		if x.StdinID() == "" {
			return 0, errors.New("exec: the agent offered no stdin side channel")
		}
		go sendSide(ctx, x, sent)
	} else {
		go sendPattern(ctx, x, sent)
	}
	var out strings.Builder
	for {
		ev, err := x.Read(ctx)
		if err != nil {
			return 0, errors.Join(err, <-sent)
		}
		if ev.Exit != nil {
			if err := <-sent; err != nil {
				return 0, err
			}
			d := time.Since(start)
			return d, checkCount(out.String())
		}
		out.Write(ev.Data)
	}
}

// sendPattern sends stdinBytes of the pattern as stdin frames, then EOF,
// and says how it went on sent. It runs in its own goroutine, owned by
// execInput, which receives from sent before it returns.
func sendPattern(ctx context.Context, x *client.ExecConn, sent chan<- error) {
	r := newPattern(stdinBytes)
	buf := make([]byte, execFrame)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := x.WriteStdin(ctx, buf[:n]); werr != nil {
				sent <- werr
				return
			}
		}
		if errors.Is(err, io.EOF) {
			sent <- x.CloseStdin(ctx)
			return
		}
		if err != nil {
			sent <- err
			return
		}
	}
}

// sendSide sends stdinBytes of the pattern on x's side channel, its end
// closing stdin, and says how it went on sent. It runs in its own
// goroutine, owned by execInput, which receives from sent before it
// returns.
func sendSide(ctx context.Context, x *client.ExecConn, sent chan<- error) {
	n, err := x.SendStdin(ctx, newPattern(stdinBytes))
	if err == nil && n != stdinBytes {
		err = fmt.Errorf("side channel: %d bytes taken", n)
	}
	sent <- err
}

// cliInput times the binary's `exec -i -- wc -c` with stdinBytes of the
// pattern as its stdin, from its start to its exit, and returns the CPU
// time the CLI process used: file, a regular file, or if empty, a pipe
// the bench writes into.
func cliInput(ctx context.Context, bin string, a *agent, file string) (time.Duration, time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, "exec", "-i", "--", "wc -c")
	cmd.Env = append(cmd.Environ(), "SANDBOX_URL="+a.base, "SANDBOX_SECRET="+a.secret)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var w io.WriteCloser
	var err error
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		cmd.Stdin = f
	} else if w, err = cmd.StdinPipe(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	var werr error
	if w != nil {
		_, werr = io.CopyBuffer(w, newPattern(stdinBytes), make([]byte, cliFeed))
		_ = w.Close()
	}
	err = cmd.Wait()
	d := time.Since(start)
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("exec -i: %w (%s)", err, strings.TrimSpace(errOut.String()))
	}
	return d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), checkCount(out.String())
}

// patternFile writes stdinBytes of the pattern to a new file of the
// system's temporary directory and returns its name; the caller removes
// it.
func patternFile() (string, error) {
	f, err := os.CreateTemp("", "sandbox-bench-stdin-*")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, newPattern(stdinBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
