package watch

import (
	"github.com/sandbox-executor/sandbox-executor/search"
	"path"
	"path/filepath"
	"strings"
)

// DefaultExcludes are the directory names a watch skips at any depth unless
// the request says otherwise: search's list (version control,
// dependencies, caches and build output, whose churn drowns what a client
// wants to see), so that a watch and a search skip the same.
var DefaultExcludes = search.DefaultExcludes()

// filter decides which paths under root a watch reports. The zero value
// of its slices means "none".
type filter struct {
	root    string
	exclude []string // globs on a base name or the path relative to root; directories and files
	include []string // globs as exclude; files only: if any, a file must match one
}

func newFilter(root string, exclude, include []string, noDefaults bool) filter {
	f := filter{root: root, include: clean(include)}
	if !noDefaults {
		f.exclude = append(f.exclude, DefaultExcludes...)
	}
	f.exclude = append(f.exclude, clean(exclude)...)
	return f
}

func clean(globs []string) []string {
	var out []string
	for _, g := range globs {
		if g = strings.Trim(strings.TrimSpace(g), "/"); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// rel returns p relative to the root, with "/" separators, and whether p
// is inside it ("" for the root itself).
func (f filter) rel(p string) (string, bool) {
	if p == f.root {
		return "", true
	}
	r, err := filepath.Rel(f.root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// excluded reports whether p, or a directory it is in below the root,
// matches an exclude glob.
func (f filter) excluded(p string) bool {
	r, ok := f.rel(p)
	if !ok {
		return true
	}
	if r == "" {
		return false
	}
	// Each ancestor below the root, then p itself: an event can come from
	// a watch set before the exclude matched (a rename into node_modules).
	for i := 0; i <= len(r); i++ {
		if i < len(r) && r[i] != '/' {
			continue
		}
		if matchAny(f.exclude, r[:i]) {
			return true
		}
	}
	return false
}

// reported reports whether an event on p (a directory if isDir) is sent.
func (f filter) reported(p string, isDir bool) bool {
	if f.excluded(p) {
		return false
	}
	if isDir || len(f.include) == 0 {
		return true
	}
	r, _ := f.rel(p)
	return matchAny(f.include, r)
}

// matchAny reports whether a glob of globs matches rel, the path relative
// to the root, or its base name.
func matchAny(globs []string, rel string) bool {
	base := path.Base(rel)
	for _, g := range globs {
		if ok, _ := path.Match(g, base); ok {
			return true
		}
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
	}
	return false
}
