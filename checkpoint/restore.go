package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// Restored says what a restore changed: paths relative to the
// directory, sorted.
type Restored struct {
	Restored    []string // files (and links) written back
	Deleted     []string // files added since, removed
	ModeChanged []string // files whose mode alone was set back
}

// Restore makes m's directory what it was: the files' contents, modes,
// owners and mtimes, links and directories; with deleteAdded, the files
// added since are removed, and the directories added since once emptied.
// Each file is written through files.WriteAtomic: a reader sees the old
// content or the recorded one, never a part, and no link a user planted
// on the way is followed. Removals, links and owners go through an
// os.Root of the directory, so that no link or rename can take them
// outside; modes and times through the tree's handle, with no link
// followed at all: os.Root's Chmod follows one inside the directory, and
// a user could point it, between the agent's look and its chmod, at a
// file of root's in the tree.
func (s *Store) Restore(ctx context.Context, m *Manifest, deleteAdded bool) (*Restored, error) {
	s.op.Lock()
	defer s.op.Unlock()
	if gone := s.missing(m); len(gone) > 0 {
		return nil, fmt.Errorf("%w: checkpoint %s: the content of %d files, %s first", ErrDamaged, m.ID, len(gone), gone[0])
	}
	if rel, ok := outside(m); ok {
		return nil, fmt.Errorf("%w: checkpoint %s: the entry %q is not a path below its directory", ErrDamaged, m.ID, rel)
	}
	root := m.Path
	if err := os.MkdirAll(root, fileMode(m.RootMode)); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	for _, d := range m.Dirs { // parents first: the list is sorted
		p := filepath.FromSlash(d.Rel)
		if fi, err := r.Lstat(p); err == nil && !fi.IsDir() {
			_ = r.Remove(p)
		}
		if err := r.Mkdir(p, fileMode(d.Mode)); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	t, err := openTree(root)
	if err != nil {
		return nil, err
	}
	defer t.close()
	cur, curDirs, err := scan(t, m.Exclude)
	if err != nil {
		return nil, err
	}
	now := make(map[string]*Entry, len(cur))
	for i := range cur {
		now[cur[i].Rel] = &cur[i]
	}
	res := &Restored{Restored: []string{}, Deleted: []string{}, ModeChanged: []string{}}
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		changed, modeOnly, err := s.restoreFile(ctx, r, t, f, now[f.Rel])
		if err != nil {
			return res, err
		}
		if changed {
			res.Restored = append(res.Restored, f.Rel)
		} else if modeOnly {
			res.ModeChanged = append(res.ModeChanged, f.Rel)
		}
	}
	if deleteAdded {
		s.deleteAdded(r, m, cur, curDirs, res)
	}
	setDirModes(r, t, m)
	sort.Strings(res.Restored)
	sort.Strings(res.Deleted)
	sort.Strings(res.ModeChanged)
	return res, nil
}

// outside returns the first entry of m whose path is not one below m's
// directory ("..", absolute, empty), if there is one. A checkpoint's
// entries come from a scan, but a restore writes as root where they say:
// one read from a damaged or hand-made manifest is refused, not followed
// out of the directory.
func outside(m *Manifest) (string, bool) {
	for _, es := range [][]Entry{m.Dirs, m.Files} {
		for _, e := range es {
			if !filepath.IsLocal(filepath.FromSlash(e.Rel)) {
				return e.Rel, true
			}
		}
	}
	return "", false
}

// testHookBeforeChmod is called just before a restore sets the mode of
// rel: a test swaps rel for a link there, where another user could.
var testHookBeforeChmod = func(rel string) {}

// restoreFile puts back one file or link; c is what is at its path now,
// nil if nothing (or a directory) is.
func (s *Store) restoreFile(ctx context.Context, r *os.Root, t *tree, f Entry, c *Entry) (changed, modeOnly bool, err error) {
	p := filepath.FromSlash(f.Rel)
	if f.Link != "" {
		if c != nil && c.Link == f.Link {
			return false, false, nil
		}
		if err := r.RemoveAll(p); err != nil {
			return false, false, err
		}
		if err := r.Symlink(f.Link, p); err != nil {
			return false, false, err
		}
		_ = r.Lchown(p, int(f.UID), int(f.GID))
		return true, false, nil
	}
	if c != nil && c.Link == "" && s.sameContent(t, f, *c) {
		if c.Mode == f.Mode && c.UID == f.UID && c.GID == f.GID {
			return false, false, nil
		}
		_ = r.Lchown(p, int(f.UID), int(f.GID))
		testHookBeforeChmod(f.Rel)
		if err := t.chmod(f); err != nil && !errors.Is(err, syscall.ELOOP) {
			return false, false, err // ELOOP: a link put in its place since, left alone
		}
		return false, true, nil
	}
	if fi, err := r.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		if err := r.RemoveAll(p); err != nil { // a link or a directory where the file was
			return false, false, err
		}
	}
	obj, err := s.openObject(f.SHA256)
	if err != nil {
		return false, false, err
	}
	defer obj.Close()
	if _, err := files.WriteAtomic(ctx, t.abs(f.Rel), obj, files.WriteOptions{Mode: fileMode(f.Mode).Perm()}); err != nil {
		return false, false, err
	}
	// Lchown, and the tree's chmod and chtimes, never follow a link: one
	// put in the file's place since gets the owner and times itself, and
	// no mode.
	_ = r.Lchown(p, int(f.UID), int(f.GID))
	testHookBeforeChmod(f.Rel)
	if err := t.chmod(f); errors.Is(err, syscall.ELOOP) { // after chown, which clears setuid
		return true, false, nil // a link put in the file's place since: left alone
	} else if err != nil {
		return false, false, err
	}
	return true, false, t.chtimes(f.Rel, f.MTime)
}

// sameContent reports whether the file now, c, holds f's content: the
// same size and mtime, or else the same hash.
func (s *Store) sameContent(t *tree, f, c Entry) bool {
	if c.Size != f.Size {
		return false
	}
	if c.MTime == f.MTime {
		return true
	}
	sum, _, err := hashFile(t, f.Rel, newHash(), make([]byte, 64<<10))
	return err == nil && sum == f.SHA256
}

// deleteAdded removes the files added since m, then the directories added
// since that are empty, deepest first.
func (s *Store) deleteAdded(r *os.Root, m *Manifest, cur, curDirs []Entry, res *Restored) {
	had := make(map[string]bool, len(m.Files)+len(m.Dirs))
	for _, f := range m.Files {
		had[f.Rel] = true
	}
	for _, d := range m.Dirs {
		had[d.Rel] = true
	}
	for _, c := range cur {
		if !had[c.Rel] && r.Remove(filepath.FromSlash(c.Rel)) == nil {
			res.Deleted = append(res.Deleted, c.Rel)
		}
	}
	dirs := slices.Clone(curDirs)
	slices.Reverse(dirs) // children after their parents in the sorted list: reversed, first
	for _, d := range dirs {
		if !had[d.Rel] {
			_ = r.Remove(filepath.FromSlash(d.Rel)) // kept if not empty: it holds excluded or new content
		}
	}
}

// setDirModes sets the directories' recorded modes back, deepest first,
// so that a read-only directory is made so after what is under it.
func setDirModes(r *os.Root, t *tree, m *Manifest) {
	for i := len(m.Dirs) - 1; i >= 0; i-- {
		d := m.Dirs[i]
		if fi, err := r.Lstat(filepath.FromSlash(d.Rel)); err == nil && fi.IsDir() && modeBits(fi.Mode()) != d.Mode {
			testHookBeforeChmod(d.Rel)
			_ = t.chmod(d) // a link put there since is refused
		}
	}
	if fi, err := r.Stat("."); err == nil && modeBits(fi.Mode()) != m.RootMode {
		_ = t.chmodRel(".", func(unix.Stat_t) uint32 { return m.RootMode & 0o7777 })
	}
}
