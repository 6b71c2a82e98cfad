package checkpoint

import (
	"github.com/sandbox-executor/sandbox-executor/search"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Manifest is the record of one checkpoint: every file under Path, by
// its path relative to Path.
type Manifest struct {
	ID        string   `json:"id"`
	Seq       int64    `json:"seq"` // orders the checkpoints of one path: the newest is HEAD
	Path      string   `json:"path"`
	Name      string   `json:"name,omitempty"`
	Exclude   []string `json:"exclude,omitempty"`
	CreatedAt string   `json:"created_at"`
	Bytes     int64    `json:"bytes"` // content newly stored by this checkpoint
	Files     []Entry  `json:"files"` // regular files and symbolic links, sorted by Rel
	Dirs      []Entry  `json:"dirs"`  // directories below Path, sorted by Rel
	RootMode  uint32   `json:"root_mode"`
}

// Entry is one file, link or directory of a checkpoint.
type Entry struct {
	Rel    string `json:"rel"`
	Mode   uint32 `json:"mode"` // permission bits, with setuid, setgid and sticky
	Size   int64  `json:"size,omitempty"`
	MTime  int64  `json:"mtime,omitempty"` // nanoseconds
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"` // a symbolic link's target
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
}

func (e Entry) isLink() bool { return e.SHA256 == "" && e.Link != "" }

func (m *Manifest) summary() Summary {
	n := 0
	for _, f := range m.Files {
		if !f.isLink() {
			n++
		}
	}
	return Summary{ID: m.ID, Path: m.Path, Name: m.Name, Files: n, Bytes: m.Bytes, CreatedAt: m.CreatedAt}
}

// DefaultExcludes are the directory names skipped at any depth: search's
// list, which the watches use too.
var DefaultExcludes = search.DefaultExcludes()

// excluded reports whether rel (relative to the root, "/"-separated)
// matches a default exclude by its name or a glob of extra by its base
// name or whole.
func excluded(rel string, isDir bool, extra []string) bool {
	base := path.Base(rel)
	if isDir {
		for _, d := range DefaultExcludes {
			if base == d {
				return true
			}
		}
	}
	for _, g := range extra {
		g = strings.Trim(g, "/")
		if ok, _ := path.Match(g, base); ok {
			return true
		}
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
	}
	return false
}

// modeBits returns m's permission bits with setuid, setgid and sticky, as
// chmod(2) takes them.
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// fileMode is modeBits's inverse.
func fileMode(b uint32) fs.FileMode {
	m := fs.FileMode(b & 0o777)
	if b&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if b&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if b&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
