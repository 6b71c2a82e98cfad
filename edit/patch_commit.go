package edit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// apply makes c, and returns what undoes it and the new file's ETag.
func (c *change) apply(ctx context.Context, o *files.Owner) (undo func(), tag string, err error) {
	if c.old != nil {
		if fi, err := os.Stat(c.path); err != nil || files.ETag(fi) != c.tag {
			return nil, "", fmt.Errorf("%w: %s", ErrStale, c.path)
		}
	}
	restore := func() { c.restore(ctx) }
	switch c.action {
	case "update":
		tag, err = commit(ctx, c.path, c.new, c.tag, o, nil)
		return restore, tag, err
	case "delete":
		if err := files.Delete(c.path, o); err != nil {
			return nil, "", err
		}
		return restore, "", nil
	}
	// add, move: a new file at dest, in directories made if need be
	made := missingDirs(c.dest)
	if _, err := os.Lstat(c.dest); !errors.Is(err, fs.ErrNotExist) {
		return nil, "", &FileError{File: c.dest, Reason: "file already exists"}
	}
	if _, err := files.WriteAtomic(ctx, c.dest, bytes.NewReader(c.new), files.WriteOptions{Mode: c.mode, Owner: o}); err != nil {
		return nil, "", err
	}
	unAdd := func() {
		_ = os.Remove(c.dest)
		for _, d := range made {
			_ = os.Remove(d) // only if empty: what else came to be there stays
		}
	}
	fi, err := os.Stat(c.dest)
	if err == nil {
		tag = files.ETag(fi)
	}
	if c.action == "move" {
		if err := files.Delete(c.path, o); err != nil {
			unAdd()
			return nil, "", err
		}
		return func() { unAdd(); restore() }, tag, nil
	}
	return unAdd, tag, nil
}

// restore puts c's file back as it was read: content, mode and owner.
// It runs when the request may be over, so it does not stop when ctx
// ends.
func (c *change) restore(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if _, err := os.Lstat(c.path); c.link != "" && errors.Is(err, fs.ErrNotExist) {
		_ = os.Symlink(c.link, c.path) // the file it leads to was not changed
		return
	}
	if _, err := files.WriteAtomic(ctx, c.path, bytes.NewReader(c.old), files.WriteOptions{Mode: c.mode}); err == nil {
		_ = os.Lchown(c.path, c.uid, c.gid)
	}
}

// missingDirs returns the directories above path that do not exist, the
// deepest first.
func missingDirs(path string) []string {
	var ds []string
	for d := filepath.Dir(path); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		ds = append(ds, d)
	}
	return ds
}
