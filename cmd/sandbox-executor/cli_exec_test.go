package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// exec is byte for byte: every byte value and 10 MiB of random bytes, on
// stdout and on stderr; CRLF, a lone CR, no last newline.
func TestCLIExecByteExact(t *testing.T) {
	a := startCLIAgent(t)
	data := make([]byte, 256, 256+10<<20)
	for i := range 256 {
		data[i] = byte(i)
	}
	data = append(data, make([]byte, 10<<20)...)
	_, _ = rand.Read(data[256:])
	f := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(f, data, 0o644))

	var stdout, stderr bytes.Buffer
	code := runCLIWith(t, a.env, nil, &stdout, &stderr, "exec", "--", "cat "+f+"; cat "+f+" >&2")
	require.Equal(t, 0, code, "%.300s", stderr.Bytes())
	assert.Equal(t, sha256.Sum256(data), sha256.Sum256(stdout.Bytes()))
	assert.Equal(t, sha256.Sum256(data), sha256.Sum256(stderr.Bytes()))

	r := runCLI(t, a.env, nil, "exec", "--", `printf 'a\r\nb\rc'; printf abc >&2`)
	assert.Equal(t, cliResult{0, "a\r\nb\rc", "abc"}, r)
}

// One word is a shell command; several are the program and its
// arguments, exactly.
func TestCLIExecArgv(t *testing.T) {
	a := startCLIAgent(t)
	dir := filepath.Join(t.TempDir(), "a file")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x y"), nil, 0o644))
	r := runCLI(t, a.env, nil, "exec", "--", "ls", "-la", dir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, " x y\n")

	r = runCLI(t, a.env, nil, "exec", "--", "sh", "-c", "echo hi; exit 3")
	assert.Equal(t, cliResult{3, "hi\n", ""}, r)

	r = runCLI(t, a.env, nil, "exec", "--", "no-such-program-here", "arg")
	assert.Equal(t, 127, r.code)
	assert.Contains(t, r.stderr, "no-such-program-here")

	// A request the agent refuses is 125, with its words.
	r = runCLI(t, a.env, nil, "exec", "-cwd", "/no/such/dir", "--", "true")
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stderr, "/no/such/dir")

	// -it with no command is the login shell; -i or -t alone needs one.
	r = runCLI(t, a.env, nil, "exec", "-t")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "no command given")
}

// exec -i streams 100 MiB of standard input into the command, byte for
// byte, and its end closes the command's.
func TestCLIExecStdin(t *testing.T) {
	a := startCLIAgent(t)
	data := make([]byte, 100<<20)
	_, _ = rand.Read(data)
	r := runCLI(t, a.env, data, "exec", "-i", "--", "sha256sum")
	sum := sha256.Sum256(data)
	assert.Equal(t, cliResult{0, hex.EncodeToString(sum[:]) + "  -\n", ""}, r)
}

// start, ps and kill: a background process by its id.
func TestCLIProcesses(t *testing.T) {
	a := startCLIAgent(t)
	r := runCLI(t, a.env, nil, "start", "--", "sleep", "100")
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	require.NotEmpty(t, id)

	r = runCLI(t, a.env, nil, "ps")
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "ID "), r.stdout)
	assert.Regexp(t, id+` +\d+ +running +- +exec 'sleep' '100'`, r.stdout)

	r = runCLI(t, a.env, nil, "kill", id, "-signal", "TERM")
	assert.Equal(t, cliResult{0, "", ""}, r)
	require.Eventually(t, func() bool {
		r := runCLI(t, a.env, nil, "ps")
		return strings.Contains(r.stdout, " 143 ")
	}, 10*time.Second, 50*time.Millisecond)

	r = runCLI(t, a.env, nil, "kill", "no-such-id")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no-such-id")
	r = runCLI(t, a.env, nil, "kill")
	assert.Equal(t, 2, r.code)
}

// A GiB through exec into sha256sum, with the agent, a process of its
// own, growing its RSS by less than 32 MiB.
func TestCLIExecGiB(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a GiB")
	}
	bin := buildBinary(t)
	url, pid := startBinaryAgent(t, bin)
	before := rssOf(t, pid)
	var peak atomic.Int64
	stop := watchRSS(t, pid, &peak)

	const size = 1 << 30
	cmd := exec.CommandContext(t.Context(), "sh", "-c", bin+" exec -- 'head -c "+strconv.Itoa(size)+" /dev/zero' | sha256sum")
	cmd.Env = append(os.Environ(), "SANDBOX_URL="+url, "SANDBOX_SECRET="+testSecret)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("a GiB through exec took over 5 minutes")
	}
	stop()
	require.NoError(t, err, "%s", stderr.Bytes())
	h := sha256.New()
	_, _ = io.CopyN(h, zeros{}, size)
	assert.Equal(t, hex.EncodeToString(h.Sum(nil))+"  -\n", string(out))
	growth := peak.Load() - before
	t.Logf("agent RSS %d KiB before, peak %d KiB", before>>10, peak.Load()>>10)
	assert.Less(t, growth, int64(32<<20), "agent RSS growth")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// buildBinary builds the agent's binary once per test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandbox-executor")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// startBinaryAgent runs bin as an agent of its own on loopback, and
// returns its URL and pid; it is stopped at the test's end.
func startBinaryAgent(t *testing.T, bin string) (string, int) {
	t.Helper()
	// A port just free: taken again in the meantime, the agent says so and
	// the test fails rather than talk to another.
	addr := closedAddr(t)
	cmd := exec.Command(bin, "-addr", addr, "-proxy-addr", "127.0.0.1:0", "-log-level", "error")
	cmd.Env = append(os.Environ(), "SANDBOX_SECRET="+testSecret)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	url := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	return url, cmd.Process.Pid
}

// rssOf returns the resident set of process pid, in bytes.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// watchRSS samples pid's RSS every 20 ms into peak until stop is called.
func watchRSS(t *testing.T, pid int, peak *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err == nil {
				for line := range strings.Lines(string(b)) {
					if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
						if kb<<10 > peak.Load() {
							peak.Store(kb << 10)
						}
					}
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Ctrl-C (the context's end) kills the command and exits 130.
func TestCLIExecInterrupt(t *testing.T) {
	a := startCLIAgent(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	errc := make(chan error, 1)
	go func() {
		o := options{stdin: bytes.NewReader(nil), stdout: stdout}
		errc <- o.run(ctx, []string{"exec", "--", "echo $$; sleep 100"}, getenv(a.env), stderr)
	}()
	require.Eventually(t, func() bool { return strings.HasSuffix(stdout.String(), "\n") }, 10*time.Second, 10*time.Millisecond)
	pgid, err := strconv.Atoi(strings.TrimSpace(stdout.String()))
	require.NoError(t, err)
	cancel()
	select {
	case err := <-errc:
		assert.Equal(t, exitCodeError{exitInterrupted}, err)
	case <-time.After(10 * time.Second):
		t.Fatal("exec did not end after Ctrl-C")
	}
	require.Eventually(t, func() bool { return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) },
		10*time.Second, 10*time.Millisecond, "the command's group outlived exec")
}

// -it (-ti too) asks for a terminal and streams stdin; with no command it
// is the login shell, as shell is. Standard input that is no terminal
// stays as it is.
func TestCLIExecTTY(t *testing.T) {
	a := startCLIAgent(t)
	for _, args := range [][]string{
		{"exec", "-it", "-env", "SHELL=/bin/sh", "-env", "PS1=$ "},
		{"exec", "-env", "PS1=$ ", "-ti", "--", "sh"},
		{"shell", "-env", "SHELL=/bin/sh", "-env", "PS1=$ "},
	} {
		r := runCLI(t, a.env, []byte("echo $((6*7)); exit 4\n"), args...)
		assert.Equal(t, 4, r.code, "%q: %s", args, r.stderr)
		assert.Contains(t, r.stdout, "42\r\n", "%q", args)
	}
}

func TestSplitShortFlags(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"-it"}, []string{"-i", "-t"}},
		{[]string{"-ti", "--", "-it"}, []string{"-i", "-t", "--", "-it"}},
		{[]string{"-cwd", "-it", "-it", "sh"}, []string{"-cwd", "-it", "-i", "-t", "sh"}},
		{[]string{"ls", "-it"}, []string{"ls", "-it"}},
		{[]string{"-cwd=/x", "-it", "ls"}, []string{"-cwd=/x", "-i", "-t", "ls"}},
	} {
		assert.Equal(t, tt.want, splitShortFlags(tt.in), "%q", tt.in)
	}
}
