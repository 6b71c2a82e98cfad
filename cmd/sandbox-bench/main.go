// Command sandbox-bench measures a sandbox-executor binary against
// references measured in the same run: it starts the agent itself on free
// loopback ports, prints a table of figures with their ratios to the
// references and their targets, and writes the same figures as JSON to
// -out and as the last line of stdout.
//
//	go run ./cmd/sandbox-bench -bin bin/sandbox-executor [-only run,stream,...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// totalTimeout bounds the whole run; the issue asks for under 3 minutes.
const totalTimeout = 170 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-bench:", err)
		os.Exit(1)
	}
}

// section is one group of figures. run adds its figures to the report
// and returns an error only if it could not measure.
type section struct {
	name string
	desc string
	run  func(b *bench, ctx context.Context) error
}

// sections lists every section in the order they run.
func sections() []section {
	return []section{
		{"run", "1: /run of true, one client", (*bench).sectionRun},
		{"concurrency", "2: /run under 16 clients", (*bench).sectionConcurrency},
		{"stream", "3: /run_streaming throughput and first-line latency", (*bench).sectionStream},
		{"fanout", "4: process logs fan-out to 50 readers", (*bench).sectionFanout},
		{"stalled", "5: a stalled log reader", (*bench).sectionStalled},
		{"proxy", "6: TCP proxy", (*bench).sectionProxy},
		{"memory", "7: memory", (*bench).sectionMemory},
		{"startup", "8: start-up and binary size", (*bench).sectionStartup},
		{"procs500", "9: RSS with 500 running processes that printed 9 MB each", (*bench).sectionRingBudget},
		{"read32", "10: peak RSS of 32 concurrent read_file of 63 MiB", (*bench).sectionReadFile},
		{"term", "11: terminal keystroke round trip and output rate over /terminal_ws", (*bench).sectionTerminal},
		{"session", "12: /run of true in a session", (*bench).sectionSession},
		{"files", "13: /files: 1 GiB up and down, ranges, a tar.gz of 10,000 files", (*bench).sectionFiles},
		{"tunnel", "14: CONNECT and WebSocket tunnels", (*bench).sectionTunnel},
		{"preview", "14: the HTTP preview proxy", (*bench).sectionPreview},
		{"stdin", "15: 100 MiB through /write_stdin into wc -c", (*bench).sectionStdin},
		{"mcp", "16: MCP tools/list over /mcp, exec of true", (*bench).sectionMCP},
		{"exec", "17: /exec_ws: 1 GiB of output to a client, 100 MiB of stdin", (*bench).sectionExec},
		{"limits", "18: /run with a limit, and wait_for_port on a listening port", (*bench).sectionLimits},
		{"contexts", "19: code contexts: a call, a creation, output rate", (*bench).sectionContexts},
		{"search", "20: /grep and /find_files against grep -rF, rg and find", (*bench).sectionSearch},
		{"checkpoint", "21: checkpoints of 10,000 files, changes, a watch's latency", (*bench).sectionCheckpoint},
		{"yield", "22: /run with yield_ms, and a poll with nothing new", (*bench).sectionYield},
	}
}

// bench holds what the sections share.
type bench struct {
	bin string
	rep *report

	// mu guards shared, the agent that sections without state of their
	// own use; sharedAgent starts it on first use.
	mu     sync.Mutex
	shared *agent
}

// sharedAgent returns the agent shared by the sections whose figures do
// not depend on the agent's history, starting it if need be.
func (b *bench) sharedAgent(ctx context.Context) (*agent, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shared != nil {
		return b.shared, nil
	}
	// gctrace lets sections count the agent's garbage collections.
	a, err := startAgent(ctx, b.bin, gcTrace)
	if err != nil {
		return nil, err
	}
	b.shared = a
	return a, nil
}

func (b *bench) stopShared() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shared != nil {
		b.shared.stop()
		b.shared = nil
	}
}

// run parses args, runs the selected sections and prints the table and
// the JSON. It is long because the flags, the profile, the sections and
// the output are one sequence that reads best in one place.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] { // the helper processes the bench starts of itself
		case relayArg:
			return relayMain(args[1:])
		case sinkArg:
			return sinkMain(args[1:])
		case httpAppArg:
			return httpAppMain(args[1:])
		}
	}
	fs := flag.NewFlagSet("sandbox-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "bin/sandbox-executor", "the agent `binary` to measure")
	out := fs.String("out", "bench/results.json", "JSON results `file`; empty writes none")
	only := fs.String("only", "", "comma-separated `sections` to run (default all): "+sectionNames())
	cpuProfile := fs.String("cpuprofile", "", "write the bench's own CPU profile to `file` (to tell client cost from agent cost)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	selected, err := selectSections(*only)
	if err != nil {
		return err
	}
	if _, err := os.Stat(*bin); err != nil {
		return fmt.Errorf("agent binary: %w (run make build)", err)
	}
	if err := raiseFileLimit(); err != nil {
		fmt.Fprintln(stderr, "sandbox-bench: warning: cannot raise RLIMIT_NOFILE:", err)
	}
	ctx, cancel := context.WithTimeout(ctx, totalTimeout)
	defer cancel()

	b := &bench{bin: *bin, rep: &report{}}
	start := time.Now()
	var names []string
	for _, s := range selected {
		names = append(names, s.name)
		t0 := time.Now()
		fmt.Fprintf(stderr, "sandbox-bench: %s (%s)...\n", s.name, s.desc)
		if err := s.run(b, ctx); err != nil {
			fmt.Fprintf(stderr, "sandbox-bench: %s failed: %v\n", s.name, err)
			b.rep.add(newFigure(s.name, "section could not measure", 0, "errors").
				withTarget("measured", false).withNote("%v", err))
		}
		fmt.Fprintf(stderr, "sandbox-bench: %s done in %.1f s\n", s.name, time.Since(t0).Seconds())
	}
	b.stopShared()
	elapsed := time.Since(start)

	res := b.rep.results()
	res.Started, res.RuntimeSeconds = start.UTC(), elapsed.Seconds()
	res.Binary, res.NumCPU, res.GoVersion, res.Sections = *bin, runtime.NumCPU(), runtime.Version(), names
	b.rep.printTable(stdout)
	fmt.Fprintf(stdout, "%d PASS, %d MISS; runtime %.1f s; JSON: %s\n", res.Passed, res.Missed, elapsed.Seconds(), *out)
	line, err := writeJSON(*out, res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

func sectionNames() string {
	var names []string
	for _, s := range sections() {
		names = append(names, s.name)
	}
	return strings.Join(names, ",")
}

// selectSections returns the sections named in only, in run order; empty
// means all.
func selectSections(only string) ([]section, error) {
	all := sections()
	if strings.TrimSpace(only) == "" {
		return all, nil
	}
	want := strings.Split(only, ",")
	for i := range want {
		want[i] = strings.TrimSpace(want[i])
		if !slices.ContainsFunc(all, func(s section) bool { return s.name == want[i] }) {
			return nil, fmt.Errorf("unknown section %q; sections: %s", want[i], sectionNames())
		}
	}
	return slices.DeleteFunc(all, func(s section) bool { return !slices.Contains(want, s.name) }), nil
}

// startCPUProfile profiles the bench process into path until the
// returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// raiseFileLimit raises this process's soft RLIMIT_NOFILE to its hard
// limit. Calling Setrlimit explicitly also makes os/exec pass the raised
// limit on to the agent (Go restores the original one in children
// otherwise), which figure 6's thousand connections need on both sides.
func raiseFileLimit() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur < 3*echoConns {
		return errors.New("the hard limit is below the 3,000 descriptors figure 6 needs")
	}
	return nil
}
