package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// DefaultCoalesce is the window in which events of one path merge.
	DefaultCoalesce = 50 * time.Millisecond
	// RingSize is how many of its last events a watch keeps.
	RingSize = 10_000
	// maxPending bounds the changes waiting out their coalescing window:
	// past it, changes are counted as dropped and said as an overflow.
	maxPending = 65_536
	// kernelBuffer is the fsnotify channel's buffer, which absorbs a burst
	// while the loop is busy before the kernel's queue has to.
	kernelBuffer = 4096
	// moveMemory is how long a moved directory's path is remembered, to
	// drop the second Rename its own watch sends (IN_MOVE_SELF).
	moveMemory = time.Second
)

// Spec says what a watch reports.
type Spec struct {
	// Path is the absolute, cleaned path watched: a directory, or a file.
	Path string
	// Recursive watches the directories below Path too, those created
	// later included.
	Recursive bool
	// Exclude and Include are globs on a base name or the path relative
	// to Path. Exclude adds to DefaultExcludes and applies to
	// directories and files; Include, if not empty, limits the files
	// reported (not the directories).
	Exclude, Include []string
	// Coalesce is the window in which the events of one path become one,
	// keeping the first op; a remove is always reported. If zero, every
	// event is sent as it comes.
	Coalesce time.Duration
}

// Watch is one running watch. Create it with Manager.Start; Close ends it.
type Watch struct {
	spec Spec
	f    filter
	m    *Manager
	fw   *fsnotify.Watcher
	ring *ring

	done      chan struct{} // closed by Close
	ended     chan struct{} // closed when run returns
	closeOnce sync.Once

	// The fields below belong to run (and to start, before run starts).
	dirs    map[string]struct{}  // the directories watched
	moved   map[string]time.Time // directories moved away, for moveMemory
	pending map[string]*pending  // changes in their coalescing window, by path
	queue   []*pending           // the same, oldest first; done ones are skipped
	dropped uint64               // changes lost since the last overflow was sent
	reason  string               // why they were lost
	capSaid bool                 // the directory cap's overflow was sent
	timer   *time.Timer
}

type pending struct {
	Event
	due  time.Time
	done bool
	// moved is set on the remove of a path renamed away: the create that
	// names it as its source turns the pair into one rename.
	moved bool
}

// start watches spec.Path, and the directories below it if recursive,
// and starts run. It fails with ErrTooManyDirs if they are more than the
// Manager's cap allows, and ErrNotFound if the path is gone.
func (w *Watch) start() error {
	fw, err := fsnotify.NewBufferedWatcher(kernelBuffer)
	if err != nil {
		return errors.Join(ErrTooMany, err) // EMFILE: the inotify instances (fs.inotify.max_user_instances)
	}
	w.fw = fw
	w.f = newFilter(w.spec.Path, w.spec.Exclude, w.spec.Include, false)
	w.ring = newRing(RingSize)
	w.dirs, w.moved, w.pending = map[string]struct{}{}, map[string]time.Time{}, map[string]*pending{}
	w.done, w.ended = make(chan struct{}), make(chan struct{})
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
	fi, err := os.Lstat(w.spec.Path)
	if err != nil {
		w.release()
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrNotFound, w.spec.Path)
		}
		return err
	}
	if !fi.IsDir() {
		err = fw.Add(w.spec.Path)
	} else {
		err = w.addTree(w.spec.Path, false)
	}
	if err != nil {
		w.release()
		return err
	}
	go w.run()
	return nil
}

// Path returns the path watched.
func (w *Watch) Path() string { return w.spec.Path }

// Read appends to dst the events after id after, at most max, and returns
// it with a channel closed when a newer event exists. Events dropped from
// the ring come first as one overflow; see ring.read.
func (w *Watch) Read(dst []Event, after uint64, max int) ([]Event, <-chan struct{}) {
	return w.ring.read(dst, after, max)
}

// Last returns the id of the newest event, 0 if none.
func (w *Watch) Last() uint64 { return w.ring.last() }

// Done returns a channel closed once the watch is closed.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Close stops the watch and waits for its goroutine; it frees its place
// among the Manager's watches. It may be called more than once.
func (w *Watch) Close() {
	w.closeOnce.Do(func() {
		close(w.done)
		<-w.ended
		w.release()
		w.m.unregister(w)
	})
}

// release closes the inotify instance and frees the directories' budget.
func (w *Watch) release() {
	w.fw.Close()
	w.m.dirs.Add(-int64(len(w.dirs)))
	w.dirs = nil
}

// run reads fsnotify's events and errors, and sends each change once its
// coalescing window is over.
//
// run runs in its own goroutine; it ends when Close closes done.
func (w *Watch) run() {
	defer close(w.ended)
	defer w.timer.Stop()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			w.handleError(err)
		case <-w.timer.C:
		}
		w.flushDue(time.Now())
		w.arm()
	}
}

func (w *Watch) handleError(err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.drop(1, "the kernel's event queue overflowed (fs.inotify.max_queued_events); how many changes were lost is unknown")
		// The lost events may have been the creation of directories,
		// which then have no watch: set the missing ones, so that the
		// watch goes on seeing the whole tree after the overflow.
		if w.spec.Recursive && len(w.dirs) > 0 {
			_ = w.addTree(w.spec.Path, false)
		}
		return
	}
	w.drop(1, "watch error: "+err.Error())
}

// handle turns one fsnotify event into changes.
func (w *Watch) handle(ev fsnotify.Event) {
	p := filepath.Clean(ev.Name)
	switch {
	case ev.Has(fsnotify.Create):
		w.created(p, renamedFrom(ev))
	case ev.Has(fsnotify.Remove):
		_, isDir := w.dirs[p]
		if isDir {
			w.forgetDir(p, false)
		}
		w.note(Event{Path: p, Op: OpRemove, IsDir: isDir}, false)
	case ev.Has(fsnotify.Rename):
		w.renamedAway(p)
	case ev.Has(fsnotify.Write):
		w.note(Event{Path: p, Op: OpWrite}, false)
	case ev.Has(fsnotify.Chmod):
		_, isDir := w.dirs[p]
		w.note(Event{Path: p, Op: OpChmod, IsDir: isDir}, false)
	}
}

// created handles a path that appeared, by creation or, if from is set,
// by a rename from from. A directory is watched at once, and what it
// already holds is reported as created unless it was moved within the
// tree: a `mkdir -p a/b/c && touch a/b/c/f` may be done before the watch
// on a is set.
func (w *Watch) created(p, from string) {
	fi, err := os.Lstat(p)
	isDir := err == nil && fi.IsDir()
	if from != "" && !w.f.excluded(from) {
		if old := w.pending[from]; old != nil && old.moved {
			old.done = true
			delete(w.pending, from)
		}
		if w.f.excluded(p) { // moved into an excluded directory: gone from view
			w.note(Event{Path: from, Op: OpRemove, IsDir: isDir}, false)
			return
		}
		w.note(Event{Path: p, Op: OpRename, IsDir: isDir, OldPath: from}, false)
		if isDir && w.spec.Recursive && p != w.spec.Path {
			w.forgetDir(from, true)
			_ = w.addTree(p, false)
		}
		return
	}
	// The directory first, then what it holds: each path after its parent.
	w.note(Event{Path: p, Op: OpCreate, IsDir: isDir}, false)
	if isDir && w.spec.Recursive && !w.f.excluded(p) {
		delete(w.moved, p)
		_ = w.addTree(p, true)
	}
}

// renamedAway handles a path renamed away: a remove, unless the create of
// its new name, which inotify sends next, pairs them.
func (w *Watch) renamedAway(p string) {
	if t, ok := w.moved[p]; ok && time.Since(t) < moveMemory {
		return // the moved directory's own IN_MOVE_SELF
	}
	if old := w.pending[p]; old != nil && old.moved {
		return
	}
	_, isDir := w.dirs[p]
	if isDir {
		w.moved[p] = time.Now()
	}
	w.note(Event{Path: p, Op: OpRemove, IsDir: isDir}, true)
}

// renamedFrom returns the path a Create event's file was renamed from, or
// "" if it was not a rename. fsnotify pairs inotify's MOVED_FROM and
// MOVED_TO by their cookie but keeps the source unexported; its String
// method is the only way to it: `CREATE "new" ← "old"`, each path quoted
// by %q, so the separator cannot appear inside the first.
func renamedFrom(ev fsnotify.Event) string {
	s := ev.String()
	const sep = "\" ← \""
	i := strings.Index(s, sep)
	if i < 0 {
		return ""
	}
	from, err := strconv.Unquote(s[i+len(sep)-1:])
	if err != nil {
		return ""
	}
	return filepath.Clean(from)
}
