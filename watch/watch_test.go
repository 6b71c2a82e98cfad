package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byPath groups the changes' ops by path, in the order they came.
func byPath(evs []Event) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		if e.Type == TypeChange {
			out[e.Path] = append(out[e.Path], e.Op)
		}
	}
	return out
}

// TestWatchSequence: every change arrives, in order per path, once after
// coalescing; a directory made with content before its watch is set
// reports that content.
func TestWatchSequence(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{})
	w := startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: DefaultCoalesce})
	c := &collector{w: w}
	p := func(rel string) string { return filepath.Join(root, rel) }

	sh(t, root, "mkdir -p a/b/c && touch a/b/c/f")
	c.until(t, 5*time.Second, hasChange(p("a/b/c/f"), OpCreate))
	write(t, p("x.txt"), "one")
	c.until(t, 5*time.Second, hasChange(p("x.txt"), OpCreate))
	// Well after the window, so that these are changes of their own.
	write(t, p("x.txt"), "two")
	c.until(t, 5*time.Second, hasChange(p("x.txt"), OpWrite))
	require.NoError(t, os.Chmod(p("x.txt"), 0o600))
	c.until(t, 5*time.Second, hasChange(p("x.txt"), OpChmod))
	require.NoError(t, os.Rename(p("x.txt"), p("a/b/y.txt")))
	c.until(t, 5*time.Second, hasChange(p("a/b/y.txt"), OpRename))
	require.NoError(t, os.Rename(p("a/b"), p("a/moved")))
	c.until(t, 5*time.Second, hasChange(p("a/moved"), OpRename))
	// The moved directory's watches follow it.
	write(t, p("a/moved/c/g"), "g")
	c.until(t, 5*time.Second, hasChange(p("a/moved/c/g"), OpCreate))
	require.NoError(t, os.RemoveAll(p("a/moved")))
	c.until(t, 5*time.Second, hasChange(p("a/moved"), OpRemove))
	evs := c.quiet(t, 200*time.Millisecond, 5*time.Second)

	want := map[string][]string{
		p("a"):             {OpCreate},
		p("a/b"):           {OpCreate},
		p("a/b/c"):         {OpCreate},
		p("a/b/c/f"):       {OpCreate},
		p("x.txt"):         {OpCreate, OpWrite, OpChmod},
		p("a/b/y.txt"):     {OpRename},
		p("a/moved"):       {OpRename, OpRemove},
		p("a/moved/c/g"):   {OpCreate, OpRemove},
		p("a/moved/c/f"):   {OpRemove},
		p("a/moved/y.txt"): {OpRemove},
		p("a/moved/c"):     {OpRemove},
	}
	assert.Equal(t, want, byPath(evs))
	for _, e := range evs {
		if e.Op == OpRename && e.Path == p("a/b/y.txt") {
			assert.Equal(t, p("x.txt"), e.OldPath)
			assert.False(t, e.IsDir)
		}
		if e.Op == OpRename && e.Path == p("a/moved") {
			assert.Equal(t, p("a/b"), e.OldPath)
			assert.True(t, e.IsDir)
		}
		if e.Path == p("a/b/c") {
			assert.True(t, e.IsDir)
		}
	}
	for i, e := range evs {
		assert.Equal(t, uint64(i+1), e.ID, "ids count from 1 without a gap")
	}
}

// TestWatchMoveInOut: a move out of the tree is a remove, a move into it
// a create, whose content is reported too.
func TestWatchMoveInOut(t *testing.T) {
	root, outside := tempDir(t), tempDir(t)
	m := newTestManager(t, Options{})
	c := &collector{w: startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: DefaultCoalesce})}
	sh(t, outside, "mkdir -p d/e && echo hi > d/e/f")
	require.NoError(t, os.Rename(filepath.Join(outside, "d"), filepath.Join(root, "d")))
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "d/e/f"), OpCreate))
	write(t, filepath.Join(root, "d/e/later"), "x") // the moved-in tree is watched
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "d/e/later"), OpCreate))
	require.NoError(t, os.Rename(filepath.Join(root, "d"), filepath.Join(outside, "d2")))
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "d"), OpRemove))
	evs := c.quiet(t, 200*time.Millisecond, 5*time.Second)
	assert.Equal(t, map[string][]string{
		filepath.Join(root, "d"):         {OpCreate, OpRemove},
		filepath.Join(root, "d/e"):       {OpCreate},
		filepath.Join(root, "d/e/f"):     {OpCreate},
		filepath.Join(root, "d/e/later"): {OpCreate},
	}, byPath(evs))
}

// TestWatchExcluded: the default excludes and exclude globs send nothing;
// include limits the files reported, not the directories.
func TestWatchExcluded(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{})
	c := &collector{w: startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: DefaultCoalesce,
		Exclude: []string{"*.log", "tmp/cache"}, Include: []string{"*.go", "marker"}})}
	sh(t, root, "mkdir -p node_modules/x .git/objects src/build tmp/cache/z && touch node_modules/x/y .git/objects/o src/build/b.go tmp/cache/z/c.go a.log src/main.go src/notes.txt")
	sh(t, root, "echo more >> node_modules/x/y && rm -r .git && touch marker")
	c.until(t, 5*time.Second, hasChange(filepath.Join(root, "marker"), OpCreate))
	evs := c.quiet(t, 200*time.Millisecond, 5*time.Second)
	assert.Equal(t, map[string][]string{
		filepath.Join(root, "src"):         {OpCreate},
		filepath.Join(root, "src/main.go"): {OpCreate},
		filepath.Join(root, "tmp"):         {OpCreate},
		filepath.Join(root, "marker"):      {OpCreate},
	}, byPath(evs))
}

// TestWatchCoalesce: within the window a path's changes are one, keeping
// the first op; a remove is always sent; without a window every event is.
func TestWatchCoalesce(t *testing.T) {
	root := tempDir(t)
	m := newTestManager(t, Options{})
	c := &collector{w: startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: time.Second})}
	sh(t, root, "echo 1 > f; echo 2 >> f; echo 3 >> f; chmod 600 f; rm f; touch marker")
	evs := c.until(t, 5*time.Second, hasChange(filepath.Join(root, "marker"), OpCreate))
	assert.Equal(t, []string{OpCreate, OpRemove}, byPath(evs)[filepath.Join(root, "f")])

	c2 := &collector{w: startWatch(t, m, Spec{Path: root, Recursive: true})}
	sh(t, root, "echo 1 > g; echo 2 >> g; touch marker2")
	evs = c2.until(t, 5*time.Second, hasChange(filepath.Join(root, "marker2"), OpCreate))
	ops := byPath(evs)[filepath.Join(root, "g")]
	// The kernel itself merges identical events not yet read: the two
	// writes may be one.
	require.GreaterOrEqual(t, len(ops), 2)
	assert.Equal(t, []string{OpCreate, OpWrite}, ops[:2])
}

// TestWatchBurst: 100,000 creations end in every event or an overflow,
// never in silence.
func TestWatchBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 files")
	}
	root := tempDir(t)
	m := newTestManager(t, Options{})
	c := &collector{w: startWatch(t, m, Spec{Path: root, Recursive: true, Coalesce: DefaultCoalesce})}
	const n = 100_000
	done := make(chan error, 1)
	go func() { // creating runs beside the reader, as a client's would
		for i := range n {
			f, err := os.Create(filepath.Join(root, fmt.Sprintf("f%06d", i)))
			if err != nil {
				done <- err
				return
			}
			f.Close()
		}
		done <- nil
	}()
	seen := map[string]bool{}
	overflow := false
	read := 0
	c.until(t, 120*time.Second, func(evs []Event) bool {
		for _, e := range evs[read:] {
			if e.Type == TypeOverflow {
				overflow = true
			} else if e.Op == OpCreate {
				seen[e.Path] = true
			}
		}
		read = len(evs)
		return overflow || len(seen) == n
	})
	require.NoError(t, <-done)
	t.Logf("events: %d creates seen, overflow %v", len(seen), overflow)
	assert.True(t, overflow || len(seen) == n)
}
