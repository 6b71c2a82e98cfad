package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// newTestRegistry returns a Registry with a Runner of its own, whose
// state files and temp workdirs go under the test's temp dir.
func newTestRegistry(t *testing.T) (*Registry, *executor.Runner) {
	t.Helper()
	runner := &executor.Runner{DrainDelay: 200 * time.Millisecond}
	dir := t.TempDir()
	// As /tmp is: other users (TestUserNobody's) reach what is in it.
	require.NoError(t, os.Chmod(dir, 0o711))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	r, err := NewRegistry(runner, Options{StateDir: dir, WorkdirParent: dir})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Close(ctx))
		runner.KillAll()
	})
	return r, runner
}

func create(t *testing.T, r *Registry, cfg Config) *Session {
	t.Helper()
	s, created, err := r.Create(cfg)
	require.NoError(t, err)
	require.True(t, created)
	return s
}

// run runs cmd in session id as /run does and returns its output.
func run(t *testing.T, r *Registry, runner *executor.Runner, id string, c executor.Command) executor.Output {
	t.Helper()
	out, err := tryRun(t.Context(), r, runner, id, c)
	require.NoError(t, err)
	return out
}

// tryRun is run for goroutines other than the test's, which may not call
// require: it returns the error instead.
func tryRun(ctx context.Context, r *Registry, runner *executor.Runner, id string, c executor.Command) (executor.Output, error) {
	call, err := r.Call(id, c)
	if err != nil {
		return executor.Output{}, err
	}
	out, err := runner.Run(ctx, call.Command)
	if err != nil {
		return executor.Output{}, err
	}
	call.Finish(&out.Result)
	return out, nil
}

func sh(cmd string) executor.Command { return executor.Command{Cmd: cmd} }

func stdout(t *testing.T, r *Registry, runner *executor.Runner, id, cmd string) string {
	t.Helper()
	out := run(t, r, runner, id, sh(cmd))
	require.Equal(t, 0, out.Code, "stderr: %s", out.Stderr)
	return string(out.Stdout)
}

func TestCdAndExportLast(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "s1"})
	x := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.Mkdir(x, 0o755))

	stdout(t, r, runner, "s1", "cd "+x)
	assert.Equal(t, x+"\n", stdout(t, r, runner, "s1", "pwd"))
	assert.Equal(t, x+"\n", stdout(t, r, runner, "s1", "echo $PWD"))

	stdout(t, r, runner, "s1", "export A=1")
	assert.Equal(t, "1\n", stdout(t, r, runner, "s1", "echo $A"))
	assert.Equal(t, "1\n", stdout(t, r, runner, "s1", "sh -c 'echo $A'"), "children see it")

	stdout(t, r, runner, "s1", "unset A")
	assert.Equal(t, "unset\n", stdout(t, r, runner, "s1", "echo ${A-unset}"))

	// cd - goes back, as OLDPWD lasts too.
	stdout(t, r, runner, "s1", "cd /")
	assert.Equal(t, x+"\n", stdout(t, r, runner, "s1", "cd - >/dev/null; pwd"))

	// Not exported: not kept.
	stdout(t, r, runner, "s1", "B=2; f() { echo f; }; alias g=echo")
	assert.Equal(t, "-\n", stdout(t, r, runner, "s1", "echo ${B-}-"))
}

func TestSourceActivate(t *testing.T) {
	r, runner := newTestRegistry(t)
	venv := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(venv, "bin"), 0o755))
	activate := fmt.Sprintf("VIRTUAL_ENV=%s\nexport VIRTUAL_ENV\nPATH=\"$VIRTUAL_ENV/bin:$PATH\"\nexport PATH\n", venv)
	require.NoError(t, os.WriteFile(filepath.Join(venv, "bin", "activate"), []byte(activate), 0o644))
	tool := "#!/bin/sh\necho venv tool\n"
	require.NoError(t, os.WriteFile(filepath.Join(venv, "bin", "venvtool"), []byte(tool), 0o755))
	create(t, r, Config{ID: "py", Cwd: venv})

	stdout(t, r, runner, "py", "source bin/activate")
	assert.Equal(t, venv+"\n", stdout(t, r, runner, "py", "echo $VIRTUAL_ENV"))
	assert.Equal(t, "venv tool\n", stdout(t, r, runner, "py", "venvtool"))
	assert.True(t, strings.HasPrefix(stdout(t, r, runner, "py", "echo $PATH"), venv+"/bin:"))
}

func TestExitCodeCommits(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "s"})
	out := run(t, r, runner, "s", sh("cd /usr; export E=3; exit 3"))
	assert.Equal(t, 3, out.Code)
	assert.Equal(t, "/usr 3\n", stdout(t, r, runner, "s", `echo "$PWD $E"`))
	out = run(t, r, runner, "s", sh("cd /; export E=f; false"))
	assert.Equal(t, 1, out.Code)
	assert.Equal(t, "/ f\n", stdout(t, r, runner, "s", `echo "$PWD $E"`))
}

// A command that is killed, exec's away or replaces the EXIT trap
// commits nothing.
func TestWhatCommitsNothing(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "s"})
	stdout(t, r, runner, "s", "export V=before")

	c := sh("export V=timeout; cd /; sleep 10")
	c.Timeout = 100 * time.Millisecond
	out := run(t, r, runner, "s", c)
	require.True(t, out.TimedOut)

	ctx, cancel := context.WithCancel(t.Context())
	call, err := r.Call("s", sh("export V=cancelled; cd /; echo started; sleep 10"))
	require.NoError(t, err)
	p, err := runner.Start(ctx, call.Command, func(executor.Stream, time.Time, [][]byte) { cancel() })
	require.NoError(t, err)
	res := p.Wait()
	call.Finish(&res)
	require.Equal(t, syscall.SIGKILL, res.Signal)

	run(t, r, runner, "s", sh("export V=killself; kill -TERM $$"))
	run(t, r, runner, "s", sh("export V=exec; exec true"))
	run(t, r, runner, "s", sh("trap 'echo mine' EXIT; export V=trap"))
	assert.Equal(t, "before\n", stdout(t, r, runner, "s", "echo $V"))
}

// The command's stdout, stderr and exit code are what they are without a
// session.
func TestSameOutputAsWithout(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "s", Cwd: "/"})
	for _, cmd := range []string{
		`echo "$0 $# $LINENO"; echo err >&2`,
		"nosuchcommand",
		"if",
		"echo a\n\nnosuchcommand\necho $LINENO",
		"set -x; echo traced; exit 4",
		"set -eu; echo $UNSET_VAR",
		"trap",
		"exec >&-; echo gone",
		"kill -TERM $$",
		"echo $?",
		"cat /nonexistent",
		"set -o noclobber; true",
		`printf '%s' "no newline"`,
		": <<EOF\nheredoc\nEOF\necho after",
		"# a comment",
		";",
	} {
		plain, err := runner.Run(t.Context(), executor.Command{Cmd: cmd, Dir: "/"})
		require.NoError(t, err)
		got := run(t, r, runner, "s", sh(cmd))
		if cmd == "trap" {
			// The one difference: the trap the session set is there.
			assert.Contains(t, string(got.Stdout), "trap -- ", cmd)
			continue
		}
		assert.Equal(t, string(plain.Stdout), string(got.Stdout), "stdout of %q", cmd)
		assert.Equal(t, string(plain.Stderr), string(got.Stderr), "stderr of %q", cmd)
		assert.Equal(t, plain.Code, got.Code, "code of %q", cmd)
	}
}

func TestValuesRoundTrip(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "s", Env: trickyValues})
	stdout(t, r, runner, "s", `export Q="it's \"q\" \$x
second line"`)
	for k, v := range trickyValues {
		got := stdout(t, r, runner, "s", fmt.Sprintf(`printf '%%s|' "$%s"`, k))
		assert.Equal(t, v+"|", got, k)
	}
	assert.Equal(t, "it's \"q\" $x\nsecond line|", stdout(t, r, runner, "s", `printf '%s|' "$Q"`))
}

// What the request sets for one command is for that command only, unless
// the command changes it.
func TestRequestOverlayIsForOneCommand(t *testing.T) {
	r, runner := newTestRegistry(t)
	base := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(base, "sub"), 0o755))
	create(t, r, Config{ID: "s", Cwd: base, Env: map[string]string{"KEEP": "session"}})

	c := sh("echo $ONE $KEEP; pwd")
	c.Env, c.Dir = map[string]string{"ONE": "1", "KEEP": "request"}, "sub"
	assert.Equal(t, "1 request\n"+filepath.Join(base, "sub")+"\n", string(run(t, r, runner, "s", c).Stdout))
	assert.Equal(t, "- session\n"+base+"\n", stdout(t, r, runner, "s", "echo ${ONE:--} $KEEP; pwd"))

	c = sh("export ONE=changed; cd ..")
	c.Env, c.Dir = map[string]string{"ONE": "1"}, "sub"
	run(t, r, runner, "s", c)
	assert.Equal(t, "changed\n"+base+"\n", stdout(t, r, runner, "s", "echo $ONE; pwd"))
}

// Commands of one session run at once; each starts from the state last
// committed, and the last to end sets the state.
func TestConcurrentCommands(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "s"})
	const n = 20
	// Every command waits until all have started: none waits for another.
	gate := filepath.Join(t.TempDir(), "started")
	var wg sync.WaitGroup
	outs := make([]executor.Output, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf(`export V%d=%d; echo started >>%s; while [ "$(wc -l <%s)" -lt %d ]; do sleep 0.01; done; echo "$V%d"`,
				i, i, gate, gate, n, i)
			c := sh(cmd)
			c.Timeout = 30 * time.Second
			outs[i], errs[i] = tryRun(t.Context(), r, runner, "s", c)
		}()
	}
	wg.Wait()
	for i, out := range outs {
		require.NoError(t, errs[i], "command %d", i)
		assert.Equal(t, 0, out.Code, "command %d: %s", i, out.Stderr)
		assert.Equal(t, strconv.Itoa(i)+"\n", string(out.Stdout), "command %d", i)
	}
	got := stdout(t, r, runner, "s", "env | grep '^V[0-9]*=' | sort")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	require.Len(t, lines, 1, "the state of exactly one of them: %q", got)
	k, v, _ := strings.Cut(lines[0], "=")
	assert.Equal(t, "V"+v, k)
}

// An idle session expires: deleted, as by Delete.
func TestIdleExpiry(t *testing.T) {
	r, runner := newTestRegistry(t)
	s := create(t, r, Config{ID: "idle", TempWorkdir: true, IdleTimeout: 300 * time.Millisecond})
	create(t, r, Config{ID: "kept"})
	workdir := s.Info().Cwd
	// A command longer than the idle timeout keeps it in use.
	c := sh("sleep 0.6; echo done")
	assert.Equal(t, "done\n", string(run(t, r, runner, "idle", c).Stdout))
	ids := func() []string {
		var ids []string
		for _, info := range r.List() {
			ids = append(ids, info.ID)
		}
		return ids
	}
	require.Eventually(t, func() bool { return len(ids()) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"kept"}, ids())
	_, err := r.Call("idle", sh("true"))
	assert.ErrorIs(t, err, ErrNotFound)
	assert.NoDirExists(t, workdir)
}
