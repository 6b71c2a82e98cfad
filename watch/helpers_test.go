package watch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestManager returns a Manager closed when the test ends.
func newTestManager(t *testing.T, o Options) *Manager {
	t.Helper()
	m := NewManager(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, m.Close(ctx))
	})
	return m
}

// startWatch watches dir (recursive, coalesced by DefaultCoalesce unless
// spec says) and closes the watch when the test ends.
func startWatch(t *testing.T, m *Manager, spec Spec) *Watch {
	t.Helper()
	w, err := m.Start(spec)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// tempDir returns a temporary directory with its symbolic links resolved,
// as the events name it.
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// collector reads a watch's events as a client would.
type collector struct {
	w     *Watch
	after uint64
	got   []Event
}

// until reads events until done says so of all read so far, or fails
// after timeout.
func (c *collector) until(t *testing.T, timeout time.Duration, done func([]Event) bool) []Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !done(c.got) {
		evs, wake := c.w.Read(nil, c.after, 4096)
		if len(evs) > 0 {
			c.got = append(c.got, evs...)
			c.after = evs[len(evs)-1].ID
			continue
		}
		select {
		case <-wake:
		case <-deadline.C:
			require.FailNowf(t, "timed out", "events so far: %+v", c.got)
		}
	}
	return c.got
}

// quiet reads events until none comes for d (the coalescing window and
// then some), bounded by timeout.
func (c *collector) quiet(t *testing.T, d, timeout time.Duration) []Event {
	t.Helper()
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		evs, wake := c.w.Read(nil, c.after, 4096)
		if len(evs) > 0 {
			c.got = append(c.got, evs...)
			c.after = evs[len(evs)-1].ID
			continue
		}
		select {
		case <-wake:
		case <-time.After(d):
			return c.got
		}
	}
	return c.got
}

// hasChange returns a condition true once a change of op on p was read.
func hasChange(p, op string) func([]Event) bool {
	return func(evs []Event) bool {
		for _, e := range evs {
			if e.Type == TypeChange && e.Path == p && e.Op == op {
				return true
			}
		}
		return false
	}
}

// sh runs script with sh in dir.
func sh(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

func write(t *testing.T, p, data string) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}
