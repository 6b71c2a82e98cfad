package watch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRingOverflow: a reader behind the ring gets an overflow naming how
// many it lost, numbered so that resuming after it is exact.
func TestRingOverflow(t *testing.T) {
	r := newRing(10)
	for i := range 25 {
		r.add(Event{Type: TypeChange, Path: "/p" + itoa(i)})
	}
	evs, _ := r.read(nil, 3, 100)
	require.Len(t, evs, 11)
	assert.Equal(t, Event{ID: 15, Type: TypeOverflow, Dropped: 12, Reason: "the watch keeps its last 10 events"}, evs[0])
	assert.Equal(t, uint64(16), evs[1].ID)
	assert.Equal(t, "/p15", evs[1].Path)
	evs, _ = r.read(nil, 15, 100)
	assert.Len(t, evs, 10, "after the overflow's id: the rest, exactly")
	evs, wake := r.read(nil, 25, 100)
	assert.Empty(t, evs)
	r.add(Event{Type: TypeChange})
	select {
	case <-wake:
	default:
		t.Fatal("an add must wake the readers")
	}
}

// TestWatchDirCap: a watch that would hold more directories than the cap
// is refused naming it; a running one that reaches it sends an overflow
// and goes on.
func TestWatchDirCap(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{MaxDirs: 3})
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755))
	_, err := m.Start(Spec{Path: root, Recursive: true})
	require.ErrorIs(t, err, ErrTooManyDirs)
	assert.Equal(t, "too many watched directories (limit 3, -max-watched-dirs)", err.Error())

	require.NoError(t, os.RemoveAll(filepath.Join(root, "a/b/c")))
	c := &collector{w: startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: DefaultCoalesce})}
	sh(t, root, "mkdir -p a/b/c/d && touch a/b/c/d/f a/top")
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "a/top"), OpCreate))
	evs := c.quiet(t, 200*time.Millisecond, 5*time.Second)
	var overflow *Event
	for i := range evs {
		if evs[i].Type == TypeOverflow {
			overflow = &evs[i]
		}
	}
	require.NotNil(t, overflow, "%+v", evs)
	assert.Contains(t, overflow.Reason, "limit 3, -max-watched-dirs")
	assert.Equal(t, uint64(1), overflow.Dropped)
}

// TestMaxWatches: past the cap, watches and waits are refused naming it;
// a closed one frees its place.
func TestMaxWatches(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{MaxWatches: 2})
	w1 := startWatch(t, m, Spec{Path: root})
	startWatch(t, m, Spec{Path: root})
	_, err := m.Start(Spec{Path: root})
	require.ErrorIs(t, err, ErrTooMany)
	assert.Equal(t, "too many watches (limit 2, -max-watches)", err.Error())
	_, err = m.WaitForPath(t.Context(), filepath.Join(root, "x"), true)
	require.ErrorIs(t, err, ErrTooMany)
	w1.Close()
	startWatch(t, m, Spec{Path: root})

	_, err = NewManager(Options{}).Start(Spec{Path: filepath.Join(root, "missing")})
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestKeptExpiry: a kept watch ends after its idle time without a poll,
// not while a stream is attached, and its place is freed.
func TestKeptExpiry(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{MaxWatches: 1})
	k, err := m.Keep(Spec{Path: root}, 100*time.Millisecond)
	require.NoError(t, err)
	detach := k.Attach()
	time.Sleep(300 * time.Millisecond) // three idle times with a stream attached: it must live
	_, err = m.Get(k.ID)
	require.NoError(t, err)
	detach()
	require.Eventually(t, func() bool { // Get would restart the idle time: look without it
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.kept[k.ID] == nil && m.running == 0
	}, 5*time.Second, 20*time.Millisecond)
	_, err = m.Get(k.ID)
	assert.ErrorIs(t, err, ErrUnknown)
	_, err = m.Keep(Spec{Path: root}, time.Minute) // the place is free again
	require.NoError(t, err)
	assert.ErrorIs(t, m.Delete("w-nope"), ErrUnknown)
}

// TestWaitForPath: a wait returns when the path appears, its parents
// made after it started; or when it goes; or not before its time.
func TestWaitForPath(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{})
	target := filepath.Join(root, "x/y/z/ready")
	got := make(chan bool, 1)
	go func() {
		ok, err := m.WaitForPath(t.Context(), target, true)
		assert.NoError(t, err)
		got <- ok
	}()
	time.Sleep(50 * time.Millisecond) // the wait is set on root; the test holds either way
	sh(t, root, "mkdir -p x/y/z && touch x/y/z/ready")
	select {
	case ok := <-got:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not see the path appear")
	}

	go func() {
		ok, err := m.WaitForPath(t.Context(), target, false)
		assert.NoError(t, err)
		got <- ok
	}()
	require.NoError(t, os.RemoveAll(filepath.Join(root, "x")))
	select {
	case ok := <-got:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not see the path go")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	ok, err := m.WaitForPath(ctx, filepath.Join(root, "never"), true)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
}

func TestFilter(t *testing.T) {
	f := newFilter("/r", []string{"*.tmp", "sub/skip"}, []string{"*.go"}, false)
	for p, want := range map[string]bool{
		"/r/a.go": true, "/r/a.txt": false, "/r/node_modules/x.go": false, "/r/sub/skip/a.go": false,
		"/r/sub/a.go": true, "/r/x.tmp": false, "/r/a/.git/HEAD": false, "/other/a.go": false,
	} {
		assert.Equal(t, want, f.reported(p, false), p)
	}
	assert.True(t, f.reported("/r/dir", true), "include limits files, not directories")
	assert.False(t, f.reported("/r/"+strings.Repeat("a/", 3)+"build", true))
}

// TestWatchOverflowRescan: after the kernel's queue overflowed, a
// directory whose watch is missing (here, one made past the directory
// cap, then room made) is watched again, and the overflow is sent.
func TestWatchOverflowRescan(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{MaxDirs: 2})
	w := startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: DefaultCoalesce})
	c := &collector{w: w}
	sh(t, root, "mkdir a")
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "a"), OpCreate))
	sh(t, root, "mkdir b")
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "b"), OpCreate)) // past the cap: b is not watched
	sh(t, root, "rmdir a")
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "a"), OpRemove))

	w.fw.Errors <- fsnotify.ErrEventOverflow // as fsnotify reports the kernel's IN_Q_OVERFLOW
	evs := c.until(t, 5*time.Second, func(evs []Event) bool {
		for _, e := range evs {
			if e.Type == TypeOverflow && strings.Contains(e.Reason, "max_queued_events") {
				return true
			}
		}
		return false
	})
	require.NotEmpty(t, evs)
	sh(t, root, "touch b/f")
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "b/f"), OpCreate))
}

// TestWaitForPathDirMadeBeforeWatch: a directory made inside the one
// about to be watched, before its watch is set, sends no event; the wait
// still finds it and sees the path appear below it.
func TestWaitForPathDirMadeBeforeWatch(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{})
	target := filepath.Join(root, "x/y/z/ready")
	deepest := make(chan struct{})
	var once sync.Once
	testHookBeforeWatch = func(dir string) {
		switch dir {
		case filepath.Join(root, "x"): // as if mkdir -p ran on between the look and the watch
			assert.NoError(t, os.MkdirAll(filepath.Join(root, "x/y/z"), 0o755))
		case filepath.Join(root, "x/y/z"):
			once.Do(func() { close(deepest) })
		}
	}
	t.Cleanup(func() { testHookBeforeWatch = nil })
	got := make(chan bool, 1)
	go func() {
		ok, err := m.WaitForPath(t.Context(), target, true)
		assert.NoError(t, err)
		got <- ok
	}()
	// Whether the wait first watches root or, if late, x itself, the
	// hook makes y/z before x's watch is set.
	require.NoError(t, os.Mkdir(filepath.Join(root, "x"), 0o755))
	select {
	case <-deepest:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait never went down to x/y/z")
	}
	require.NoError(t, os.WriteFile(target, nil, 0o644))
	select {
	case ok := <-got:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not see the path appear")
	}
}

// TestWaitForPathDirGoneBeforeWatch: the deepest directory removed between
// the wait's look and its watch is not an error: the wait looks again.
func TestWaitForPathDirGoneBeforeWatch(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{})
	require.NoError(t, os.MkdirAll(filepath.Join(root, "x/y/z"), 0o755))
	target := filepath.Join(root, "x/y/z/ready")
	require.NoError(t, os.WriteFile(target, nil, 0o644))
	testHookBeforeWatch = func(dir string) {
		if dir == filepath.Join(root, "x/y/z") { // as if rm -rf ran between the look and the watch
			assert.NoError(t, os.RemoveAll(filepath.Join(root, "x")))
		}
	}
	t.Cleanup(func() { testHookBeforeWatch = nil })
	ok, err := m.WaitForPath(t.Context(), target, false)
	require.NoError(t, err)
	assert.True(t, ok)
}
