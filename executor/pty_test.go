package executor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

// readPTY reads master until it reads EIO (nobody holds the terminal) or
// 10 s pass.
func readPTY(t *testing.T, master *os.File) string {
	t.Helper()
	require.NoError(t, master.SetReadDeadline(time.Now().Add(10*time.Second)))
	var out bytes.Buffer
	_, err := io.Copy(&out, master)
	require.ErrorIs(t, err, syscall.EIO, "output so far: %q", out.String())
	return out.String()
}

// A TTY command is a session leader with the terminal as its controlling
// terminal, starts at the size asked, and counts against MaxRunning until
// it has been waited for.
func TestStartTTY(t *testing.T) {
	r := &Runner{MaxRunning: 1}
	// It waits for a line before it exits, so that it still holds its slot
	// when the second start is tried; stty -echo keeps that line out of
	// its output.
	p, master, err := r.StartTTY(TTYCommand{Args: []string{"/bin/sh", "-c",
		`stty -echo; echo "$$ $(cut -d' ' -f6 /proc/$$/stat) $(stty size) $FOO"; read x; exit 3`},
		Env: map[string]string{"FOO": "bar"}, Cols: 100, Rows: 30})
	require.NoError(t, err)
	defer master.Close()
	_, _, err = r.StartTTY(TTYCommand{Args: []string{"/bin/sh", "-c", "true"}})
	assert.ErrorIs(t, err, ErrBusy, "the terminal holds the only slot")
	// The line comes after stty -echo has run: the reply is not echoed.
	require.NoError(t, master.SetReadDeadline(time.Now().Add(10*time.Second)))
	first, err := bufio.NewReader(master).ReadString('\n') // nothing more is written before the reply
	require.NoError(t, err)
	_, err = master.Write([]byte("go\n"))
	require.NoError(t, err)

	out := first + readPTY(t, master)
	res := p.Wait()
	assert.Equal(t, 3, res.Code)
	pid := strconv.Itoa(p.Pid())
	assert.Equal(t, pid+" "+pid+" 30 100 bar\r\n", out, "its own session, at the size asked, with its env")

	p2, m2, err := r.StartTTY(TTYCommand{Args: []string{"/bin/true"}})
	require.NoError(t, err, "the slot is back once it has been waited for")
	readPTY(t, m2)
	p2.Wait()
	m2.Close()
}

func TestStartTTYErrors(t *testing.T) {
	r := &Runner{}
	for _, c := range []TTYCommand{{}, {Args: []string{"/bin/sh", "a\x00b"}}, {Args: []string{"/bin/sh"}, Env: map[string]string{"A=B": "c"}}} {
		_, _, err := r.StartTTY(c)
		assert.ErrorIs(t, err, ErrInvalidCommand, "%q", c.Args)
	}
	_, _, err := r.StartTTY(TTYCommand{Args: []string{"/bin/sh"}, Dir: "/no/such/dir"})
	assert.ErrorIs(t, err, ErrInvalidDir)
	_, _, err = r.StartTTY(TTYCommand{Args: []string{"/no/such/program"}})
	assert.Error(t, err)
	assert.Equal(t, 0, r.running, "no slot is kept by a failed start")
}

// The master's reads honour deadlines and end when it is closed: a
// terminal whose session lingers can still be stopped.
func TestTTYMasterIsPollable(t *testing.T) {
	r := &Runner{}
	p, master, err := r.StartTTY(TTYCommand{Args: []string{"/bin/sh", "-c", "sleep 100"}})
	require.NoError(t, err)
	require.NoError(t, master.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err = master.Read(make([]byte, 10))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)

	require.NoError(t, Resize(master, 123, 45))
	fg, err := ForegroundGroup(master)
	require.NoError(t, err)
	assert.Equal(t, p.Pid(), fg, "sh -c without job control: the leader's group is in the foreground")

	_, err = p.SignalSession(syscall.SIGKILL)
	require.NoError(t, err)
	assert.Equal(t, 128+9, p.Wait().Code)
	master.Close()
}

// SignalSession reaches every process of the session, in whatever process
// group: here a job an interactive shell put in a group of its own, and
// that job's child.
var kidsRE = regexp.MustCompile(`kids (\d+) (\d+)`)

func TestSignalSession(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs /bin/bash for job control")
	}
	r := &Runner{}
	p, master, err := r.StartTTY(TTYCommand{Args: []string{"/bin/bash", "--norc", "-i"}, Env: map[string]string{"PS1": "$ "}})
	require.NoError(t, err)
	defer master.Close()
	// A job in the background (its own group) whose child is a grandchild
	// of the shell; both pids are printed.
	_, err = master.Write([]byte("sh -c 'sleep 100 & echo kids $$ $!; wait' &\n"))
	require.NoError(t, err)
	var out strings.Builder
	buf := make([]byte, 4096)
	var kids []int
	require.Eventually(t, func() bool {
		_ = master.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, _ := master.Read(buf)
		out.Write(buf[:n])
		m := kidsRE.FindStringSubmatch(out.String())
		if m == nil {
			return false
		}
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		kids = []int{a, b}
		return true
	}, 10*time.Second, 10*time.Millisecond, "output: %q", &out)
	for _, pid := range kids {
		require.True(t, testutil.Alive(pid))
		pgid, _ := syscall.Getpgid(pid)
		assert.NotEqual(t, p.Pid(), pgid, "the job has a group of its own: a group kill of the leader misses it")
	}

	n, err := p.SignalSession(syscall.SIGKILL)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 3)
	p.Wait()
	for _, pid := range kids {
		assert.Eventually(t, func() bool { return !testutil.Alive(pid) }, 5*time.Second, 10*time.Millisecond)
	}
	assert.Empty(t, sessionMembers(p.Pid()))
	_, err = p.SignalSession(syscall.SIGKILL)
	assert.True(t, errors.Is(err, ErrFinished), "nothing left: %v", err)
}

// With a running Reaper, a TTY command's exit status still reaches its
// own waiter: StartTTY starts it through the Reaper and tells it when it
// has been waited for.
func TestStartTTYWithReaper(t *testing.T) {
	reaper := NewReaper()
	reaper.MinInterval = time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); reaper.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	r := &Runner{Reaper: reaper}
	var runs sync.WaitGroup
	for i := range 20 {
		runs.Add(1)
		go func() {
			defer runs.Done()
			p, master, err := r.StartTTY(TTYCommand{Args: []string{"/bin/sh", "-c", "exit " + strconv.Itoa(i%7)}})
			if !assert.NoError(t, err) {
				return
			}
			defer master.Close()
			assert.Equal(t, i%7, p.Wait().Code)
		}()
	}
	runs.Wait()
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	assert.Empty(t, reaper.ours, "every one was handed back with Done")
}
