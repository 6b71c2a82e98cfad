package executor

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

// setSubreaper makes the test process adopt orphaned descendants, as PID
// 1 would, until the test ends.
func setSubreaper(t *testing.T) {
	t.Helper()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

func TestReaperReapsOrphansButNotOurChildren(t *testing.T) {
	setSubreaper(t)
	reaper := NewReaper()
	reaper.MinInterval = time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); reaper.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	r := Runner{Reaper: reaper}
	// The shell exits at once; its background child is orphaned to us and
	// becomes our zombie when it exits.
	out, err := r.Run(t.Context(), Command{Cmd: "sleep 0.1 & echo $!"})
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out.Stdout)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(orphan))
		return os.IsNotExist(err)
	}, 5*time.Second, 5*time.Millisecond, "orphan %d was not reaped", orphan)

	// Meanwhile every command's own exit status reaches os/exec: the
	// reaper never steals a child that Run waits for.
	var runs sync.WaitGroup
	for i := 0; i < 40; i++ {
		runs.Add(1)
		go func() {
			defer runs.Done()
			out, err := r.Run(t.Context(), Command{Cmd: "sleep 0.01 & exit " + strconv.Itoa(i%7)})
			if assert.NoError(t, err) {
				assert.Equal(t, i%7, out.Code)
			}
		}()
	}
	runs.Wait()
}

func TestParseStat(t *testing.T) {
	state, ppid, ok := parseStat([]byte("123 (a) b (c)) Z 1 123 123 0 -1"))
	require.True(t, ok)
	assert.Equal(t, byte('Z'), state)
	assert.Equal(t, 1, ppid)
	_, _, ok = parseStat([]byte("garbage"))
	assert.False(t, ok)
}
