package edit

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// apply makes c through root, and returns what undoes it and the new
// file's ETag. It runs, as its undo does, with o's identity.
func (c *change) apply(root *patchRoot, o *files.Owner) (undo func(), tag string, err error) {
	if c.old != nil {
		if err := c.unchanged(root); err != nil {
			return nil, "", err
		}
	}
	restore := func() { c.restore(root) }
	switch c.action {
	case "update":
		meta := fileMeta{mode: c.mode, chown: o == nil, uid: c.uid, gid: c.gid}
		if err := root.writeAtomic(c.target, c.new, meta, func() error { return c.unchanged(root) }); err != nil {
			return nil, "", root.outside(err, c.path)
		}
		return restore, etagAt(root, c.target), nil
	case "delete":
		if err := root.r.Remove(c.rel); err != nil {
			return nil, "", root.outside(err, c.path)
		}
		return restore, "", nil
	}
	// add, move: a new file at dest, in directories made if need be
	made := root.missingDirs(c.destRel)
	if _, err := root.r.Lstat(c.destRel); !errors.Is(err, fs.ErrNotExist) {
		return nil, "", &FileError{File: c.dest, Reason: "file already exists"}
	}
	if len(made) > 0 {
		if err := root.r.MkdirAll(filepath.Dir(c.destRel), 0o755); err != nil {
			return nil, "", root.outside(err, c.dest)
		}
	}
	unAdd := func() {
		_ = root.r.Remove(c.destRel)
		for _, d := range made {
			_ = root.r.Remove(d) // only if empty: what else came to be there stays
		}
	}
	absent := func() error {
		if _, err := root.r.Lstat(c.destRel); !errors.Is(err, fs.ErrNotExist) {
			return &FileError{File: c.dest, Reason: "file already exists"}
		}
		return nil
	}
	if err := root.writeAtomic(c.destRel, c.new, fileMeta{mode: c.mode}, absent); err != nil {
		unAdd()
		return nil, "", root.outside(err, c.dest)
	}
	tag = etagAt(root, c.destRel)
	if c.action == "move" {
		if err := root.r.Remove(c.rel); err != nil {
			unAdd()
			return nil, "", root.outside(err, c.path)
		}
		return func() { unAdd(); restore() }, tag, nil
	}
	return unAdd, tag, nil
}

// unchanged refuses with ErrStale if c's file is no longer as read.
func (c *change) unchanged(root *patchRoot) error {
	if fi, err := root.r.Stat(c.rel); err != nil || files.ETag(fi) != c.tag {
		return fmt.Errorf("%w: %s", ErrStale, c.path)
	}
	return nil
}

// etagAt returns the ETag of the file at rel, or "" if it cannot be read.
func etagAt(root *patchRoot, rel string) string {
	fi, err := root.r.Stat(rel)
	if err != nil {
		return ""
	}
	return files.ETag(fi)
}

// restore puts c's file back as it was read: content, mode and, if the
// identity it runs with may, owner. It runs through the root with the
// patch's identity, as the writes it undoes did.
func (c *change) restore(root *patchRoot) {
	if _, err := root.r.Lstat(c.rel); c.link != "" && errors.Is(err, fs.ErrNotExist) {
		_ = root.r.Symlink(c.link, c.rel) // the file it leads to was not changed
		return
	}
	_ = root.writeAtomic(c.target, c.old, fileMeta{mode: c.mode, chown: true, uid: c.uid, gid: c.gid}, nil)
}
