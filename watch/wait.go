package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WaitForPath returns as soon as path exists (or, with exists false, is
// gone), true then, or false when ctx ends first. It watches the deepest
// directory of path that exists, and looks again at path only when that
// directory changes: it never polls the disk. path's parent need not
// exist yet. It counts against MaxWatches while it waits.
func (m *Manager) WaitForPath(ctx context.Context, path string, exists bool) (bool, error) {
	if err := m.acquire(); err != nil {
		return false, err
	}
	defer m.releaseSlot()
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return false, errors.Join(ErrTooMany, err)
	}
	defer fw.Close()
	watched := ""
	for {
		// Watch first, then look: a change between the two is then seen
		// by both, never by neither. That holds for the deepest directory
		// too: one made inside dir before its watch was set sends no
		// event, so once the watch is set the deepest is looked for again,
		// until it is the one watched.
		dir := deepestDir(path)
		if dir != watched {
			if watched != "" {
				_ = fw.Remove(watched)
			}
			if testHookBeforeWatch != nil {
				testHookBeforeWatch(dir)
			}
			if err := fw.Add(dir); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					watched = "" // gone between the look and the watch: look again
					continue
				}
				return false, err
			}
			watched = dir
			continue
		}
		if present(path) == exists {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-fw.Events:
			if !ok {
				return false, ErrClosed
			}
			if filepath.Clean(ev.Name) == watched && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				_ = fw.Remove(watched)
				watched = "" // its watch went with it: set one again
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return false, ErrClosed
			}
			_ = err // an overflow: looking again, as for any event, is the answer
		}
	}
}

// testHookBeforeWatch, if set, is called with the directory WaitForPath
// is about to watch, before it does.
var testHookBeforeWatch func(dir string)

func present(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// deepestDir returns the parent of path if it is a directory, else the
// nearest ancestor that is one ("/" at worst).
func deepestDir(path string) string {
	d := filepath.Dir(path)
	for {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return d
		}
		d = parent
	}
}

// MaxWaitTimeout bounds the timeout of a wait for a path.
const MaxWaitTimeout = 300 * time.Second
