package edit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// PatchRequest is an apply_patch. Its JSON is the wire request.
type PatchRequest struct {
	Patch string `json:"patch"`
	// Cwd is the directory the patch's paths are relative to; absolute
	// paths must be under it. If empty, the agent's working directory.
	Cwd string `json:"cwd"`
}

// PatchFile is one file a patch changed.
type PatchFile struct {
	Path   string `json:"path"`           // absolute; for a move, the new path
	Action string `json:"action"`         // "add", "update", "delete" or "move"
	ETag   string `json:"etag,omitempty"` // the new file's ETag; none for a deletion
}

// PatchReply is apply_patch's answer.
type PatchReply struct {
	Success bool        `json:"success"`
	Files   []PatchFile `json:"files"`
	Diff    string      `json:"diff"` // the unified diffs of every file, in the patch's order, each cut over 1 MiB
}

// HunkError is apply_patch's error when a hunk does not apply: the file,
// the hunk's 1-based number in that file's section, and the lines of the
// file most like the hunk's first one.
type HunkError struct {
	File    string
	Hunk    int
	Nearest []Line
	Reason  string
}

func (e *HunkError) Error() string {
	return fmt.Sprintf("%s: hunk %d does not apply: %s", e.File, e.Hunk, e.Reason)
}
func (e *HunkError) Is(target error) bool { return target == ErrConflict }

// FileError is apply_patch's error when a file is not as its action
// needs: an Add onto an existing file, a Delete of a missing one, a Move
// onto an existing one.
type FileError struct {
	File   string
	Reason string
}

func (e *FileError) Error() string        { return e.File + ": " + e.Reason }
func (e *FileError) Is(target error) bool { return target == ErrConflict }

// ApplyPatch applies req's patch as o (nil: the agent): every file is
// read and every hunk matched before anything is written; then the files
// change in the patch's order, each atomically, and if one fails (or
// changed since it was read: ErrStale) those already changed are put
// back as they were, content, mode and owner. A path the patch names
// twice is refused. Matching follows Codex's own apply_patch: a hunk's
// lines are looked for exactly, then ignoring trailing whitespace, then
// ignoring leading and trailing whitespace, then also with typographic
// quotes, dashes and spaces read as their ASCII forms; see seek. Like
// Codex's, an updated file always ends with a line end (a missing final
// newline is added), and a hunk whose last old line is empty is also
// tried without it. Unlike Codex's, a CRLF file keeps CRLF line ends,
// and a hunk's kept lines keep the file's own text (Codex writes the
// patch's, so that a context line matched loosely would be rewritten).
// Every file is reached through an os.Root of cwd (see patchRoot): a
// path that leads outside it, by "..", as an absolute path or through a
// symbolic link, is refused with ErrInvalid and nothing is read or
// written there. Everything, the rollback included, runs with o's
// file-system identity (files.AsOwner).
func ApplyPatch(ctx context.Context, req PatchRequest, o *files.Owner) (*PatchReply, error) {
	return applyPatch(ctx, req, o, nil)
}

// change is one file's change, planned: everything needed to make it
// and to undo it.
type change struct {
	action    string
	path      string // absolute
	dest      string // absolute: path, or where a move goes
	rel       string // path relative to the root
	destRel   string // dest relative to the root
	target    string // the file path leads to (itself, or a link's), relative to the root: what an update replaces
	old, new  []byte // old is nil for an added file, new for a deleted one
	tag       string // old's ETag when read
	link      string // what the path's symbolic link pointed to, if it was one
	mode      fs.FileMode
	uid, gid  int
	destNamed string // dest as the diff names it
	pathNamed string
}

func applyPatch(ctx context.Context, req PatchRequest, o *files.Owner, beforeFile func(i int)) (*PatchReply, error) {
	acts, err := parsePatch(req.Patch)
	if err != nil {
		return nil, err
	}
	cwd := req.Cwd
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return nil, err
	}
	var rep *PatchReply
	err = files.AsOwner(o, func() error {
		root, err := openPatchRoot(cwd)
		if err != nil {
			return err
		}
		defer root.Close()
		rep, err = applyIn(ctx, root, acts, o, beforeFile)
		return err
	})
	return rep, err
}

// applyIn plans every change, then makes them in order, undoing those
// made if one fails. It runs with o's identity.
func applyIn(ctx context.Context, root *patchRoot, acts []action, o *files.Owner, beforeFile func(i int)) (*PatchReply, error) {
	changes, err := plan(acts, root)
	if err != nil {
		return nil, err
	}
	rep := &PatchReply{Success: true, Files: []PatchFile{}}
	var undo []func()
	for i, c := range changes {
		if err := ctx.Err(); err != nil {
			rollback(undo)
			return nil, err
		}
		if beforeFile != nil {
			beforeFile(i)
		}
		u, tag, err := c.apply(root, o)
		if err != nil {
			rollback(undo)
			return nil, err
		}
		undo = append(undo, u)
		rep.Files = append(rep.Files, PatchFile{Path: c.dest, Action: c.action, ETag: tag})
		rep.Diff += unifiedDiff(c.pathNamed, c.destNamed, c.old, c.new)
	}
	return rep, nil
}

// rollback undoes the changes made, the last first.
func rollback(undo []func()) {
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
}

// plan reads every file the actions touch and computes its new content.
func plan(acts []action, root *patchRoot) ([]*change, error) {
	seen := map[string]bool{}
	var cs []*change
	for _, a := range acts {
		c, err := planOne(a, root)
		if err != nil {
			return nil, err
		}
		names := []string{c.path}
		if c.dest != c.path {
			names = append(names, c.dest)
		}
		for _, p := range names {
			if seen[p] {
				return nil, fmt.Errorf("%w: the patch changes %s twice", ErrInvalid, p)
			}
			seen[p] = true
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func planOne(a action, root *patchRoot) (*change, error) {
	path, err := under(root.dir, a.path)
	if err != nil {
		return nil, err
	}
	c := &change{action: a.kind, path: path, dest: path, pathNamed: path, destNamed: path}
	c.rel = root.rel(path)
	c.destRel = c.rel
	switch a.kind {
	case "add":
		if _, err := root.r.Lstat(c.rel); !errors.Is(err, fs.ErrNotExist) {
			if err = root.outside(err, path); errors.Is(err, ErrInvalid) {
				return nil, err
			}
			return nil, &FileError{File: path, Reason: "file already exists"}
		}
		c.new, c.pathNamed, c.mode = joinLines(a.add, false), "/dev/null", 0o644
		return c, nil
	case "delete":
		if err := c.read(root); errors.Is(err, fs.ErrNotExist) {
			return nil, &FileError{File: path, Reason: "no such file to delete"}
		} else if err != nil {
			return nil, err
		}
		c.destNamed = "/dev/null"
		return c, nil
	}
	if err := c.read(root); err != nil {
		return nil, err
	}
	if c.new, err = applyHunks(path, c.old, a.hunks); err != nil {
		return nil, err
	}
	if a.moveTo != "" {
		if c.dest, err = under(root.dir, a.moveTo); err != nil {
			return nil, err
		}
		c.destRel = root.rel(c.dest)
		if _, err := root.r.Lstat(c.destRel); c.dest != path && !errors.Is(err, fs.ErrNotExist) {
			if err = root.outside(err, c.dest); errors.Is(err, ErrInvalid) {
				return nil, err
			}
			return nil, &FileError{File: c.dest, Reason: "the file to move to already exists"}
		}
		c.action, c.destNamed = "move", c.dest
	}
	return c, nil
}

// read reads the file c changes, and what restores it.
func (c *change) read(root *patchRoot) error {
	data, fi, target, err := root.read(c.rel, c.path)
	if err != nil {
		return err
	}
	c.old, c.tag, c.target, c.mode = data, files.ETag(fi), target, fi.Mode().Perm()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		c.uid, c.gid = int(st.Uid), int(st.Gid)
	}
	if link, err := root.r.Readlink(c.rel); err == nil {
		c.link = link // a deletion or a move removes the link: restore makes it again
	}
	return nil
}

// under returns p made absolute against cwd, if it is below cwd.
func under(cwd, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: a file of the patch has no path", ErrInvalid)
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(cwd, p)
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(cwd, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%w: %s is not under %s", ErrInvalid, p, cwd)
	}
	return abs, nil
}
