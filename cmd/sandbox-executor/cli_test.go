package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// cliResult is what a CLI run left: its exit code and output.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cliAgent is an agent started in-process for the CLI tests, with what a
// user of the CLI would have in their environment.
type cliAgent struct {
	*testAgent
	url string
	env map[string]string // SANDBOX_URL and SANDBOX_SECRET
	c   *client.Client
}

func startCLIAgent(t *testing.T) *cliAgent {
	t.Helper()
	a := startAgent(t, map[string]string{"SANDBOX_SECRET": testSecret}, options{})
	url := "http://" + a.api.String()
	c, err := client.New(url, testSecret, client.WithHTTPClient(a.client))
	require.NoError(t, err)
	return &cliAgent{testAgent: a, url: url, c: c,
		env: map[string]string{"SANDBOX_URL": url, "SANDBOX_SECRET": testSecret}}
}

// runCLI runs the CLI in-process as "sandbox-executor args..." would, with
// env as its environment and stdin as its input.
func runCLI(t *testing.T, env map[string]string, stdin []byte, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runCLIWith(t, env, stdin, &stdout, &stderr, args...)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// runCLIWith is runCLI writing to stdout and stderr; it returns the exit
// code.
func runCLIWith(t *testing.T, env map[string]string, stdin []byte, stdout, stderr io.Writer, args ...string) int {
	o := options{stdin: bytes.NewReader(stdin), stdout: stdout}
	err := o.run(t.Context(), args, getenv(env), stderr)
	var exit exitCodeError
	switch {
	case errors.As(err, &exit):
		return exit.code
	case err != nil:
		t.Errorf("run returned %v, not an exit code", err)
		return -1
	}
	return 0
}

// startCLI runs the CLI in a goroutine, its output readable as it comes,
// and returns a function that waits for its exit code.
func startCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr *testutil.SyncBuffer, wait func() int) {
	stdout, stderr = &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	done := make(chan int, 1)
	go func() { done <- runCLIWith(t, env, nil, stdout, stderr, args...) }()
	return stdout, stderr, func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(20 * time.Second):
			t.Fatalf("%q did not end; stderr: %s", args, stderr)
			return -1
		}
	}
}

func TestCLIExec(t *testing.T) {
	a := startCLIAgent(t)
	r := runCLI(t, a.env, nil, "exec", "--", "echo out; echo err >&2; exit 3")
	assert.Equal(t, cliResult{3, "out\n", "err\n"}, r)

	r = runCLI(t, a.env, nil, "exec", "echo", "several", "words", "-n")
	assert.Equal(t, cliResult{0, "several words -n\n", ""}, r, "words are joined; flags after CMD are its own")

	dir := t.TempDir()
	r = runCLI(t, a.env, nil, "exec", "-env", "A=1", "-env", "B=x=y", "-cwd", dir, "--", `echo "$A $B"; pwd`)
	assert.Equal(t, cliResult{0, "1 x=y\n" + dir + "\n", ""}, r)

	r = runCLI(t, a.env, nil, "exec", "-timeout", "0.2", "--", "echo before; sleep 10")
	assert.Equal(t, 124, r.code)
	assert.Equal(t, "before\n", r.stdout)
	assert.Equal(t, "sandbox-executor: command timed out after 200ms\n", r.stderr)

	r = runCLI(t, a.env, nil, "exec", "--", "seq 1 20000")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, seq(1, 20000), r.stdout)

	// Output is printed as it comes, not when the command ends.
	gate := filepath.Join(t.TempDir(), "gate")
	stdout, stderr, wait := startCLI(t, a.env, "exec", "--",
		fmt.Sprintf("echo first; echo err >&2; while [ ! -e %s ]; do sleep 0.01; done; echo second", gate))
	require.Eventually(t, func() bool { return stdout.String() == "first\n" && stderr.String() == "err\n" },
		10*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	assert.Equal(t, 0, wait())
	assert.Equal(t, "first\nsecond\n", stdout.String())

	// The URL and the token from flags rather than the environment.
	r = runCLI(t, nil, nil, "exec", "-url", a.api.String(), "-token", testSecret, "--", "echo flags")
	assert.Equal(t, cliResult{0, "flags\n", ""}, r, "a URL without a scheme is http")

	// -i sends standard input; without it the command reads nothing.
	r = runCLI(t, a.env, []byte("print(6*7)"), "exec", "-i", "--", "python3 -")
	assert.Equal(t, cliResult{0, "42\n", ""}, r)
	r = runCLI(t, a.env, []byte("ignored"), "exec", "--", "cat; echo end")
	assert.Equal(t, cliResult{0, "end\n", ""}, r)
	// Since exec streams over /exec_ws, -i is byte for byte: input that
	// is not UTF-8 comes back as it went.
	r = runCLI(t, a.env, []byte{0xff, 0xfe}, "exec", "-i", "--", "cat")
	assert.Equal(t, cliResult{0, "\xff\xfe", ""}, r)

	// A session, created by the first exec that names it: cd and export
	// last from one exec to the next.
	r = runCLI(t, a.env, nil, "exec", "-session", "s1", "--", "cd / && export IN=session && echo in-session")
	assert.Equal(t, cliResult{0, "in-session\n", ""}, r)
	r = runCLI(t, a.env, nil, "exec", "-session", "s1", "--", `echo "$PWD $IN"; exit 3`)
	assert.Equal(t, cliResult{3, "/ session\n", ""}, r)
	r = runCLI(t, a.env, nil, "exec", "-session", "bad/id", "--", "true")
	assert.Equal(t, 125, r.code)
	assert.Contains(t, r.stderr, "invalid session: id must be")
}

func seq(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintln(&b, i)
	}
	return b.String()
}

func TestCLIErrors(t *testing.T) {
	a := startCLIAgent(t)
	wrongToken := map[string]string{"SANDBOX_URL": a.url, "SANDBOX_SECRET": "wrong"}
	r := runCLI(t, wrongToken, nil, "exec", "--", "true")
	assert.Equal(t, cliResult{125, "", "sandbox-executor exec: the agent refused the token (401): set SANDBOX_SECRET (or -token) to the agent's secret\n"}, r)
	r = runCLI(t, wrongToken, nil, "logs", "x")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "the agent refused the token (401)")

	closed := "http://" + closedAddr(t)
	r = runCLI(t, map[string]string{"SANDBOX_URL": closed, "SANDBOX_SECRET": "x"}, nil, "exec", "--", "true")
	assert.Equal(t, 125, r.code)
	host := strings.TrimPrefix(closed, "http://")
	assert.Equal(t, "sandbox-executor exec: cannot reach the agent at "+closed+": dial tcp "+host+": connect: connection refused\n", r.stderr)

	r = runCLI(t, map[string]string{"SANDBOX_SECRET": "x"}, nil, "exec", "--", "true")
	assert.Equal(t, cliResult{125, "", "sandbox-executor exec: no agent URL: give -url or set SANDBOX_URL (such as http://127.0.0.1:3030)\n"}, r)
	r = runCLI(t, map[string]string{"SANDBOX_URL": a.url}, nil, "cp", "-", "sandbox:/tmp/x")
	assert.Equal(t, cliResult{1, "", "sandbox-executor cp: no token: set SANDBOX_SECRET (or give -token) to the agent's secret\n"}, r)

	r = runCLI(t, a.env, nil, "logs", "no-such-id")
	assert.Equal(t, cliResult{1, "", "sandbox-executor logs: the agent has no process with id \"no-such-id\"\n"}, r)

	// Wrong uses are exit code 2, with the usage.
	for _, args := range [][]string{
		{"exec"}, {"exec", "-timeout", "soon", "--", "true"}, {"exec", "-env", "NOEQUALS", "--", "true"}, {"exec", "-nosuchflag"},
		{"logs"}, {"logs", "a", "b"}, {"cp", "a"}, {"cp", "a", "b"}, {"cp", "sandbox:/a", "sandbox:/b"}, {"cp", "sandbox:", "b"},
	} {
		r := runCLI(t, a.env, nil, args...)
		assert.Equal(t, 2, r.code, "%q", args)
		assert.Contains(t, r.stderr, "usage: sandbox-executor "+args[0], "%q", args)
	}
	r = runCLI(t, a.env, nil, "exec", "-h")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "-session", "help goes to stdout")
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestCLILogs(t *testing.T) {
	a := startCLIAgent(t)
	ctx := t.Context()
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: "echo one; echo two >&2; echo three"})
	require.NoError(t, err)
	r := runCLI(t, a.env, nil, "logs", "-f", p.ID)
	assert.Equal(t, cliResult{0, "one\nthree\n", "two\n"}, r)

	r = runCLI(t, a.env, nil, "logs", p.ID, "-t") // flags may follow the ID
	require.Equal(t, 0, r.code, r.stderr)
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		stamp, text, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		ts, err := time.Parse(time.RFC3339Nano, stamp)
		require.NoError(t, err, line)
		assert.WithinDuration(t, time.Now(), ts, time.Minute)
		assert.Contains(t, []string{"one", "three"}, text)
	}

	// -f follows a process that is still printing, to its end.
	gate := filepath.Join(t.TempDir(), "gate")
	p, err = a.c.StartProcess(ctx, client.Command{Cmd: fmt.Sprintf(
		"seq 1 100; while [ ! -e %s ]; do sleep 0.01; done; seq 101 3000", gate)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return retained(t, a.c, p.ID) == 100 }, 10*time.Second, 10*time.Millisecond)
	r = runCLI(t, a.env, nil, "logs", p.ID)
	assert.Equal(t, cliResult{0, seq(1, 100), ""}, r, "without -f: what is retained now")
	stdout, stderr, wait := startCLI(t, a.env, "logs", "-f", p.ID)
	require.Eventually(t, func() bool { return stdout.String() == seq(1, 100) }, 10*time.Second, 10*time.Millisecond,
		"the retained lines are printed at once")
	require.NoError(t, os.WriteFile(gate, nil, 0o644)) // then it follows the rest live
	assert.Equal(t, 0, wait())
	assert.Equal(t, seq(1, 3000), stdout.String())
	assert.Empty(t, stderr.String())
}

// retained returns how many lines process id has printed so far.
func retained(t *testing.T, c *client.Client, id string) int {
	n := 0
	for _, err := range c.ProcessLogs(t.Context(), id, client.LogsOptions{NoFollow: true}) {
		require.NoError(t, err)
		n++
	}
	return n - 1 // complete
}

// cpRoundTrip copies src (holding data) to dst with cp, checks that
// remoteFile, where dst puts it, holds data, then copies remoteFile back
// to back and checks it too.
func cpRoundTrip(t *testing.T, a *cliAgent, data []byte, src, dst, remoteFile, back string) {
	t.Helper()
	r := runCLI(t, a.env, nil, "cp", src, dst)
	require.Equal(t, cliResult{0, "", ""}, r)
	got, err := os.ReadFile(remoteFile)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "upload changed the bytes")

	r = runCLI(t, a.env, nil, "cp", "sandbox:"+remoteFile, back)
	require.Equal(t, cliResult{0, "", ""}, r)
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the round trip changed the bytes")
}

func TestCLICp(t *testing.T) {
	a := startCLIAgent(t)
	local, remote := t.TempDir(), t.TempDir() // the "sandbox" is this machine

	data := make([]byte, 1<<20+17) // random bytes: invalid UTF-8, NULs, everything
	_, _ = rand.Read(data)
	src := filepath.Join(local, "blob.bin")
	require.NoError(t, os.WriteFile(src, data, 0o600))

	back := filepath.Join(local, "back.bin")
	cpRoundTrip(t, a, data, src, "sandbox:"+filepath.Join(remote, "up.bin"), filepath.Join(remote, "up.bin"), back)
	st, err := os.Stat(filepath.Join(remote, "up.bin"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the upload keeps the local file's permissions")
	st, err = os.Stat(back)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the remote file's permissions")
	leftovers, err := filepath.Glob(filepath.Join(local, ".*sandbox-cp*"))
	require.NoError(t, err)
	assert.Empty(t, leftovers)

	// Into directories: the file keeps its name.
	r := runCLI(t, a.env, nil, "cp", src, "sandbox:"+remote)
	require.Equal(t, cliResult{0, "", ""}, r)
	assert.FileExists(t, filepath.Join(remote, "blob.bin"))
	sub := filepath.Join(local, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	r = runCLI(t, a.env, nil, "cp", "sandbox:"+filepath.Join(remote, "blob.bin"), sub)
	require.Equal(t, cliResult{0, "", ""}, r)
	got, err := os.ReadFile(filepath.Join(sub, "blob.bin"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))

	// Standard input and output, and an executable keeps its x bits.
	script := filepath.Join(remote, "run.sh")
	r = runCLI(t, a.env, []byte("#!/bin/sh\necho hi\n"), "cp", "-", "sandbox:"+script)
	require.Equal(t, cliResult{0, "", ""}, r)
	require.NoError(t, os.Chmod(script, 0o775))
	r = runCLI(t, a.env, nil, "cp", "sandbox:"+script, "-")
	assert.Equal(t, cliResult{0, "#!/bin/sh\necho hi\n", ""}, r)
	r = runCLI(t, a.env, nil, "cp", "sandbox:"+script, local+"/")
	require.Equal(t, cliResult{0, "", ""}, r)
	st, err = os.Stat(filepath.Join(local, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())

	// Errors keep the agent's words.
	missing := filepath.Join(remote, "missing")
	r = runCLI(t, a.env, nil, "cp", "sandbox:"+missing, back)
	assert.Equal(t, cliResult{1, "", "sandbox-executor cp: stat " + missing + ": no such file or directory\n"}, r)
	r = runCLI(t, a.env, nil, "cp", "sandbox:"+remote, back)
	assert.Equal(t, cliResult{1, "", "sandbox-executor cp: sandbox:" + remote + " is a directory: copy it with cp -r\n"}, r)
	r = runCLI(t, a.env, nil, "cp", local, "sandbox:"+remote)
	assert.Equal(t, cliResult{1, "", "sandbox-executor cp: " + local + " is a directory: copy it with cp -r\n"}, r)
	r = runCLI(t, a.env, nil, "cp", "sandbox:/dev/null", back)
	assert.Equal(t, cliResult{1, "", "sandbox-executor cp: read /dev/null: devices cannot be read (400 Bad Request)\n"}, r)

	// Missing parent directories on the sandbox are created, as PUT
	// /files creates them.
	r = runCLI(t, a.env, nil, "cp", src, "sandbox:"+filepath.Join(missing, "x"))
	require.Equal(t, cliResult{0, "", ""}, r)
	assert.FileExists(t, filepath.Join(missing, "x"))
	r = runCLI(t, a.env, []byte("x"), "cp", "-", "sandbox:"+remote)
	assert.Equal(t, cliResult{1, "", "sandbox-executor cp: sandbox:" + remote + " is a directory: give the file's name on the sandbox\n"}, r)
}

// TestCLIBinary runs the built binary as a user would, for what only a
// real process shows: main's exit code and the streams it writes to.
func TestCLIBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "sandbox-executor")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	a := startCLIAgent(t)

	run := func(env []string, args ...string) cliResult {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cliResult{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}
	env := []string{"SANDBOX_URL=" + a.url, "SANDBOX_SECRET=" + testSecret}
	assert.Equal(t, cliResult{42, "out\n", "err\n"}, run(env, "exec", "--", "echo out; echo err >&2; exit 42"))
	r := run([]string{"SANDBOX_URL=" + a.url, "SANDBOX_SECRET=wrong"}, "exec", "--", "true")
	assert.Equal(t, cliResult{125, "", "sandbox-executor exec: the agent refused the token (401): set SANDBOX_SECRET (or -token) to the agent's secret\n"}, r)

	// The hidden rlimit helper: main hands it over before anything else,
	// and help never lists it.
	assert.Equal(t, cliResult{0, "20\n", ""}, run(nil, executor.HelperArg, "nofile=20", "--", "/bin/sh", "sh", "-c", "ulimit -n"))
	r = run(nil, executor.HelperArg, "bogus=1", "--", "/bin/true", "true")
	assert.Equal(t, 126, r.code)
	help := run(nil, "help")
	assert.Equal(t, 0, help.code)
	assert.NotContains(t, help.stdout+help.stderr, executor.HelperArg)
}
