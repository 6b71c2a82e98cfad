package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// checkLinks refuses the archive if one of its symbolic links leads
// outside the directory. It runs once the whole archive is known, because
// a link's target may go through links that come after it.
func (x *extractor) checkLinks() error {
	for name, target := range x.links {
		if !x.inside(name) {
			return refuse(name, fmt.Sprintf("a symbolic link to %q, which leads outside the directory", target))
		}
	}
	return nil
}

// inside reports whether the link name, resolved from where it is and
// following the archive's own links, stays in the tree. A loop of links
// leads nowhere, and so not outside.
func (x *extractor) inside(name string) bool {
	cur := linkElems(filepath.Dir(name)) // the link's parents are directories: checkParents saw to it
	todo, ok := x.targetElems(x.links[name], &cur)
	if !ok {
		return false
	}
	for hops := 0; len(todo) > 0; {
		elem := todo[0]
		todo = todo[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, elem)
		target, ok := x.links[strings.Join(cur, "/")]
		if !ok {
			continue
		}
		if hops++; hops > maxLinks {
			return true
		}
		cur = cur[:len(cur)-1]
		elems, ok := x.targetElems(target, &cur)
		if !ok {
			return false
		}
		todo = append(elems, todo...)
	}
	return true
}

// targetElems returns the elements of a link's target to resolve from
// *cur; for an absolute target inside the destination, it resets *cur to
// the root and returns the elements relative to it. It returns false for
// an absolute target outside.
func (x *extractor) targetElems(target string, cur *[]string) ([]string, bool) {
	if !filepath.IsAbs(target) {
		return linkElems(target), true
	}
	rel, err := filepath.Rel(x.dest, filepath.Clean(target))
	if err != nil || !within(x.dest, target) {
		return nil, false
	}
	*cur = (*cur)[:0]
	return linkElems(rel), true
}

func linkElems(p string) []string {
	if p == "." || p == "" {
		return []string{}
	}
	return strings.Split(p, "/")
}

// within reports whether the absolute path p is dir or below it.
func within(dir, p string) bool {
	dir, p = filepath.Clean(dir), filepath.Clean(p)
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

// place moves the unpacked tree into the destination: the temporary
// directory itself if the destination did not exist, else its entries
// one by one, after checking that none will fail for a directory in the
// way. Then the restricted directories get their modes.
func (x *extractor) place(d destination) error {
	if !d.exists {
		if err := os.Chmod(x.root, 0o755); err != nil {
			return err
		}
		if err := os.Rename(x.root, d.path); err != nil {
			return asPath(err, "rename", d.path)
		}
	} else {
		if err := inTheWay(x.root, d.path); err != nil {
			return err
		}
		if err := merge(x.root, d.path); err != nil {
			return err
		}
	}
	for _, rd := range x.restricted {
		if err := os.Chmod(filepath.Join(d.path, rd.name), rd.mode); err != nil {
			return err
		}
	}
	return nil
}

// inTheWay returns an EISDIR error for the first non-directory of the tree
// src whose place in dst is held by a directory, which merge would not
// replace.
func inTheWay(src, dst string) error {
	des, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, de := range des {
		d := filepath.Join(dst, de.Name())
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err
		case !fi.IsDir():
			continue
		case !de.IsDir():
			return &fs.PathError{Op: "extract", Path: d, Err: syscall.EISDIR}
		}
		if err := inTheWay(filepath.Join(src, de.Name()), d); err != nil {
			return err
		}
	}
	return nil
}

// merge moves the entries of the directory src into the directory dst:
// an entry dst lacks is renamed into it, a directory dst has too is
// merged (and gets the mode of src's), anything else of dst (a file, a
// link, even a link to a directory) is replaced.
func merge(src, dst string) error {
	des, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, de := range des {
		s, d := filepath.Join(src, de.Name()), filepath.Join(dst, de.Name())
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case fi.IsDir() && de.IsDir():
			if err := merge(s, d); err != nil {
				return err
			}
			if sfi, err := os.Lstat(s); err == nil {
				_ = os.Chmod(d, sfi.Mode().Perm())
			}
			continue
		case fi.IsDir():
			return &fs.PathError{Op: "extract", Path: d, Err: syscall.EISDIR}
		case de.IsDir():
			// rename(2) puts a directory only where nothing is.
			if err := os.Remove(d); err != nil {
				return err
			}
		}
		if err := os.Rename(s, d); err != nil {
			return err
		}
	}
	return nil
}
