package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
)

// MaxDiff caps the unified diff of Changes, in bytes; past it the diff
// stops at a file's boundary and says so with DiffTruncated.
const MaxDiff = 8 << 20

// binarySniff is how much of a file is looked at for a NUL byte, which
// makes it binary (as git and diff decide).
const binarySniff = 8000

// Changes are the differences between a checkpoint and its directory as
// it is now: paths relative to the directory, files only, sorted.
type Changes struct {
	Added       []string
	Modified    []string
	Deleted     []string
	ModeChanged []string
	// Diff, when asked for, is a unified diff of the text files added,
	// modified and deleted, as `diff -ruN` with a/ and b/ prefixes and
	// /dev/null for a side without the file; binary files are named,
	// not diffed.
	Diff          string
	DiffTruncated bool
}

// Changes compares m with its directory as it is now: sizes and mtimes
// first, hashing only the files whose differ. Both lists are sorted by
// path, so they are walked side by side, with no map of either.
func (s *Store) Changes(ctx context.Context, m *Manifest, withDiff bool) (*Changes, error) {
	t, err := openTree(m.Path)
	if err != nil {
		return nil, err
	}
	defer t.close()
	cur, _, err := scan(t, m.Exclude)
	if err != nil {
		return nil, err
	}
	old := m.Files
	if !slices.IsSortedFunc(old, byRel) {
		old = slices.Clone(old) // a manifest written by hand
		slices.SortFunc(old, byRel)
	}
	ch := &Changes{Added: []string{}, Modified: []string{}, Deleted: []string{}, ModeChanged: []string{}}
	var check, was []Entry // files whose size or mtime differ, now and then
	for i, j := 0, 0; i < len(cur) || j < len(old); {
		switch {
		case j == len(old) || (i < len(cur) && cur[i].Rel < old[j].Rel):
			ch.Added = append(ch.Added, cur[i].Rel)
			i++
			continue
		case i == len(cur) || cur[i].Rel > old[j].Rel:
			ch.Deleted = append(ch.Deleted, old[j].Rel)
			j++
			continue
		}
		c, o := cur[i], old[j]
		i, j = i+1, j+1
		switch {
		case c.Link != o.Link:
			ch.Modified = append(ch.Modified, c.Rel)
		case c.Link == "" && (c.Size != o.Size || c.MTime != o.MTime):
			check, was = append(check, c), append(was, o)
		}
		if c.Link == "" && o.Link == "" && c.Mode != o.Mode {
			ch.ModeChanged = append(ch.ModeChanged, c.Rel)
		}
	}
	if err := s.hashAll(ctx, t, check, nil); err != nil {
		return nil, err
	}
	for k, c := range check {
		if c.Rel == "" || c.SHA256 != was[k].SHA256 { // gone since the scan, or changed
			ch.Modified = append(ch.Modified, was[k].Rel)
		}
	}
	slices.Sort(ch.Modified)
	if withDiff {
		if err := s.diff(t, m, ch); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// diff fills ch.Diff with the diffs of t's files, in path order. If content
// of m the diff needs is missing from the store, it returns an error
// wrapping ErrDamaged rather than diff the file as if it were new.
func (s *Store) diff(t *tree, m *Manifest, ch *Changes) error {
	if gone := s.missing(m); len(gone) > 0 {
		for _, rel := range gone {
			_, mod := slices.BinarySearch(ch.Modified, rel)
			_, del := slices.BinarySearch(ch.Deleted, rel)
			if mod || del {
				return fmt.Errorf("%w: checkpoint %s: the content of %s", ErrDamaged, m.ID, rel)
			}
		}
	}
	old := make(map[string]*Entry, len(m.Files))
	for i := range m.Files {
		old[m.Files[i].Rel] = &m.Files[i]
	}
	paths := slices.Concat(ch.Added, ch.Modified, ch.Deleted)
	slices.Sort(paths)
	var b strings.Builder
	for _, rel := range paths {
		var before, after []byte
		var okA, okB bool
		if o := old[rel]; o != nil && o.Link == "" {
			before, okA = s.readObjectCapped(o.SHA256)
		}
		if _, deleted := slices.BinarySearch(ch.Deleted, rel); !deleted {
			after, okB = s.readCapped(t, rel)
		}
		if !okA && !okB {
			continue // links, or unreadable on both sides
		}
		part, fits := filePatch(rel, before, after, okA, okB)
		if !fits || b.Len()+len(part) > MaxDiff {
			ch.DiffTruncated = true
			break
		}
		b.WriteString(part)
	}
	ch.Diff = b.String()
	return nil
}

// readCapped reads the regular file rel of t, without following a link,
// if it is at most MaxDiff bytes; ok is false otherwise. A bigger file
// reads as nil with ok true and a length past the cap, which filePatch
// takes as too big.
func (s *Store) readCapped(t *tree, rel string) ([]byte, bool) {
	f, _, err := t.openRegular(rel)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDiff+1))
	if err != nil {
		return nil, false
	}
	return data, true
}

// readObjectCapped is readCapped of the stored content sum.
func (s *Store) readObjectCapped(sum string) ([]byte, bool) {
	r, err := s.openObject(sum)
	if err != nil {
		return nil, false
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, MaxDiff+1))
	return data, err == nil
}

// filePatch returns one file's part of the diff; fits is false if the
// file is over MaxDiff.
func filePatch(rel string, before, after []byte, hasBefore, hasAfter bool) (string, bool) {
	if len(before) > MaxDiff || len(after) > MaxDiff {
		return "", false
	}
	a, b := "a/"+rel, "b/"+rel
	from, to := a, b
	if !hasBefore {
		from = "/dev/null"
	}
	if !hasAfter {
		to = "/dev/null"
	}
	head := fmt.Sprintf("diff -ruN %s %s\n", a, b)
	if isBinary(before) || isBinary(after) {
		return head + fmt.Sprintf("Binary files %s and %s differ\n", a, b), true
	}
	edits := udiff.Lines(string(before), string(after))
	u, err := udiff.ToUnified(from, to, string(before), edits, udiff.DefaultContextLines)
	if err != nil || u == "" {
		return "", true
	}
	return head + u, true
}

func isBinary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), binarySniff)], 0) >= 0 }
