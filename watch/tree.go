package watch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// addTree watches dir and, if the watch is recursive, the directories
// below it that are not excluded, each before it is listed so that
// nothing made meanwhile is missed. With report, what they hold is
// reported as created (a directory that appeared with content). It
// returns ErrTooManyDirs at the directory cap, after an overflow saying
// so; the directories already watched stay.
func (w *Watch) addTree(dir string, report bool) error {
	stack := []string{dir}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if err := w.addDir(d); err != nil {
			if errors.Is(err, ErrTooManyDirs) {
				return err
			}
			continue // gone meanwhile: its remove is reported
		}
		if !w.spec.Recursive && d != w.spec.Path {
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			isDir := e.IsDir() // a link to a directory is not followed
			if w.f.excluded(p) {
				continue
			}
			if report {
				w.note(Event{Path: p, Op: OpCreate, IsDir: isDir}, false)
			}
			if isDir && w.spec.Recursive {
				stack = append(stack, p)
			}
		}
	}
	return nil
}

// addDir watches one directory, within the Manager's directory cap and
// the kernel's max_user_watches; past either it notes an overflow, once.
func (w *Watch) addDir(d string) error {
	if _, ok := w.dirs[d]; ok {
		return nil
	}
	if !w.m.takeDir() {
		w.capReached("the watched-directory cap (limit " + itoa(w.m.maxDirs()) + ", -max-watched-dirs) was reached; changes in new directories are not reported")
		return ErrTooManyDirs
	}
	if err := w.fw.Add(d); err != nil {
		w.m.dirs.Add(-1)
		if errors.Is(err, syscall.ENOSPC) {
			w.capReached("the kernel's inotify watches (fs.inotify.max_user_watches) ran out; changes in new directories are not reported")
			return ErrTooManyDirs
		}
		return err
	}
	w.dirs[d] = struct{}{}
	return nil
}

func (w *Watch) capReached(reason string) {
	if !w.capSaid {
		w.capSaid = true
		w.drop(1, reason)
	}
}

// forgetDir stops watching d and, with below, the directories under it:
// it was removed, or moved (its watches then keep the old paths).
func (w *Watch) forgetDir(d string, below bool) {
	forget := func(p string) {
		_ = w.fw.Remove(p) // the kernel may have removed it already
		delete(w.dirs, p)
		w.m.dirs.Add(-1)
	}
	if _, ok := w.dirs[d]; ok {
		forget(d)
	}
	if !below {
		return
	}
	prefix := d + "/"
	for p := range w.dirs {
		if strings.HasPrefix(p, prefix) {
			forget(p)
		}
	}
}
