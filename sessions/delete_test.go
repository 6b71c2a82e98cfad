package sessions

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// readPids waits until file holds n pids, one a line, and returns them.
func readPids(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(file)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		return len(pids) >= n
	}, 10*time.Second, 10*time.Millisecond)
	return pids
}

// Delete leaves no process of the session, grandchildren included, and
// no workdir.
func TestDeleteKillsEverything(t *testing.T) {
	r, runner := newTestRegistry(t)
	s := create(t, r, Config{ID: "d", TempWorkdir: true})
	workdir := s.Info().Cwd
	require.DirExists(t, workdir)
	pids := filepath.Join(t.TempDir(), "pids")

	// A finished command that left a grandchild in its group.
	out := run(t, r, runner, "d", sh("sleep 300 >/dev/null 2>&1 & echo $! >>"+pids))
	require.Equal(t, 0, out.Code)
	// A background process with a grandchild.
	bg, err := r.Background("d", sh("sleep 300 & echo $! >>"+pids+"; echo $$ >>"+pids+"; wait"))
	require.NoError(t, err)
	p, err := runner.Start(context.Background(), bg, func(executor.Stream, time.Time, [][]byte) {})
	require.NoError(t, err)
	// A foreground command, running, with a grandchild of a grandchild.
	call, err := r.Call("d", sh("sh -c 'sleep 300 & echo $! >>"+pids+"; wait' & echo $$ >>"+pids+"; wait"))
	require.NoError(t, err)
	done := make(chan executor.Result, 1)
	go func() {
		out, err := runner.Run(context.Background(), call.Command)
		assert.NoError(t, err)
		call.Finish(&out.Result)
		done <- out.Result
	}()
	all := readPids(t, pids, 5)
	info := r.List()[0]
	assert.Equal(t, 2, info.Running, "the foreground command and the background process")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.Delete(ctx, "d"))
	for _, pid := range all {
		assert.False(t, testutil.Alive(pid), "pid %d survived", pid)
	}
	assert.NoDirExists(t, workdir)
	p.Wait()
	res := <-done
	assert.Equal(t, 137, res.Code)

	assert.ErrorIs(t, r.Delete(ctx, "d"), ErrNotFound)
	_, err = r.Call("d", sh("true"))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = r.Background("d", sh("true"))
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, r.List())
}

// A command that starts while its session is being deleted is killed.
func TestStartDuringDelete(t *testing.T) {
	r, runner := newTestRegistry(t)
	create(t, r, Config{ID: "d"})
	c := sh("sleep 300")
	c.Timeout = 10 * time.Second // bounds the test if the kill is missing
	call, err := r.Call("d", c)
	require.NoError(t, err)
	require.NoError(t, r.Delete(t.Context(), "d"))
	out, err := runner.Run(t.Context(), call.Command)
	require.NoError(t, err)
	call.Finish(&out.Result)
	assert.Equal(t, 137, out.Code)
}

func TestCreate(t *testing.T) {
	r, _ := newTestRegistry(t)
	s := create(t, r, Config{})
	info := s.Info()
	assert.Len(t, info.ID, 36, "a UUID")
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, wd, info.Cwd)

	create(t, r, Config{ID: "a.B_c-9", Cwd: "/tmp"})
	_, _, err = r.Create(Config{ID: "a.B_c-9"})
	assert.ErrorIs(t, err, ErrExists)
	again, created, err := r.Create(Config{ID: "a.B_c-9", Cwd: "/", Reuse: true})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, "/tmp", again.Info().Cwd, "the existing session, as it is")

	for _, id := range []string{"a/b", "..x/", "a b", strings.Repeat("x", 129), "é"} {
		_, _, err := r.Create(Config{ID: id})
		assert.ErrorIs(t, err, ErrInvalid, id)
	}
	_, _, err = r.Create(Config{Cwd: "/nonexistent"})
	assert.ErrorIs(t, err, executor.ErrInvalidDir)
	_, _, err = r.Create(Config{Cwd: "/etc/passwd"})
	assert.ErrorIs(t, err, executor.ErrInvalidDir)
	_, _, err = r.Create(Config{Env: map[string]string{"A=B": "x"}})
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, `invalid session: environment variable name "A=B"`, err.Error())
	assert.Len(t, r.List(), 2)

	full, err := NewRegistry(&executor.Runner{}, Options{StateDir: t.TempDir(), MaxSessions: 1})
	require.NoError(t, err)
	defer full.Close(context.Background())
	create(t, full, Config{ID: "one"})
	_, _, err = full.Create(Config{ID: "two"})
	assert.ErrorIs(t, err, ErrTooMany)
}

// Close deletes every session: their processes and workdirs.
func TestCloseDeletesAll(t *testing.T) {
	runner := &executor.Runner{}
	dir := t.TempDir()
	r, err := NewRegistry(runner, Options{StateDir: dir, WorkdirParent: dir})
	require.NoError(t, err)
	s := create(t, r, Config{ID: "c", TempWorkdir: true})
	call, err := r.Call("c", sh("sleep 300"))
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() {
		out, _ := runner.Run(context.Background(), call.Command)
		call.Finish(&out.Result)
		done <- out.Code
	}()
	require.Eventually(t, func() bool { return s.Info().Running == 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.Close(t.Context()))
	assert.Equal(t, 137, <-done)
	assert.NoDirExists(t, s.Info().Cwd)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "workdir and state directory removed")
	_, _, err = r.Create(Config{})
	assert.ErrorIs(t, err, ErrClosed)
}
