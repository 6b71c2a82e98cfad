// Package checkpoint records a directory's files (mode, size, mtime,
// sha256) and keeps their content in a content-addressed store, each
// distinct content once, so that what changed since can be listed and
// diffed, and the directory restored. It knows nothing of HTTP.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Errors the Store returns.
var (
	// ErrNotFound is returned for an unknown checkpoint id, or HEAD of a
	// path that has none.
	ErrNotFound = errors.New("no such checkpoint")
	// ErrBudget is returned when a checkpoint's new content would take
	// the store past its budget; nothing was stored.
	ErrBudget = errors.New("over the checkpoint budget")
	// ErrNotDir is returned for a path that is not a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrNoPath is returned for a path that does not exist.
	ErrNoPath = errors.New("no such directory")
)

// DefaultBudget is the store's byte budget unless Options set one.
const DefaultBudget = 1 << 30

// Options configures a Store.
type Options struct {
	// Dir is the state directory; the store lives in its "checkpoints"
	// directory, made 0700.
	Dir string
	// Budget caps the content bytes stored. If zero, DefaultBudget.
	Budget int64
	// BudgetText is how the budget is named in errors (the flag's value,
	// such as "1GiB"). If empty, the number of bytes.
	BudgetText string
}

// Store holds the checkpoints. Open it with Open; it keeps nothing open
// between calls, and needs no Close.
//
// On disk, under Dir/checkpoints: manifests/<id>.json, one per
// checkpoint; packs/pack-<hex>.pack and .idx, the content (pack.go); tmp/,
// what is being written; and objects/xx/yyyy, the one-file-per-object
// layout of earlier agents, still read.
type Store struct {
	dir        string
	budget     int64
	budgetText string

	// op serializes the operations that change the store (create,
	// restore, delete), so that a budget checked is a budget kept.
	op sync.Mutex
	// mu guards cps, refs, locs, packs and stored.
	mu     sync.Mutex
	cps    map[string]*Manifest
	refs   map[string]int       // object → how many checkpoints use it
	locs   map[string]loc       // object → where its content is, for each stored object in use
	packs  map[string]*packInfo // pack name → its size and live bytes
	stored int64                // content bytes of the objects of locs
}

// Open opens (or makes) the store in o.Dir, with the checkpoints an
// earlier agent left there. What a crash left half-made is dropped: a
// pack whose index is missing or does not check out is read again up to
// its last whole object, and the content no checkpoint uses is freed.
func Open(o Options) (*Store, error) {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.BudgetText == "" {
		o.BudgetText = fmt.Sprint(o.Budget)
	}
	s := &Store{dir: filepath.Join(o.Dir, "checkpoints"), budget: o.Budget, budgetText: o.BudgetText,
		cps: map[string]*Manifest{}, refs: map[string]int{}, locs: map[string]loc{}, packs: map[string]*packInfo{}}
	for _, d := range []string{s.dir, s.packDir(), s.manDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// What a crash left half-made; only if old, as another agent may be
	// using the same directory (which is not supported, but must not lose
	// its data).
	tmps, _ := os.ReadDir(s.tmpDir())
	for _, t := range tmps {
		if stale(t) {
			_ = os.Remove(filepath.Join(s.tmpDir(), t.Name()))
		}
	}
	return s, s.load()
}

func (s *Store) objDir() string { return filepath.Join(s.dir, "objects") }
func (s *Store) manDir() string { return filepath.Join(s.dir, "manifests") }
func (s *Store) tmpDir() string { return filepath.Join(s.dir, "tmp") }

func (s *Store) objPath(sum string) string { return filepath.Join(s.objDir(), sum[:2], sum[2:]) }

// staleAge is how old a file a crash left behind must be before Open
// removes it.
const staleAge = time.Hour

func stale(d os.DirEntry) bool {
	fi, err := d.Info()
	return err == nil && time.Since(fi.ModTime()) > staleAge
}

// load reads the manifests and counts the objects they use, then finds
// them in the packs and the old layout's object files.
func (s *Store) load() error {
	ents, err := os.ReadDir(s.manDir())
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.manDir(), e.Name()))
		if err != nil {
			return err
		}
		m := new(Manifest)
		if err := json.Unmarshal(data, m); err != nil {
			return fmt.Errorf("checkpoint %s: %w", e.Name(), err)
		}
		s.cps[m.ID] = m
		for _, f := range m.Files {
			if f.SHA256 != "" {
				s.refs[f.SHA256]++
			}
		}
	}
	if err := s.loadPacks(); err != nil {
		return err
	}
	s.loadLoose()
	for _, l := range s.locs {
		s.stored += l.n
	}
	for name, p := range s.packs {
		if p.live == 0 {
			s.removePack(name)
		}
	}
	return nil
}

// Summary is what a listing shows of a checkpoint.
type Summary struct {
	ID        string `json:"id"`
	Path      string `json:"path"`
	Name      string `json:"name,omitempty"`
	Files     int    `json:"files"`
	Bytes     int64  `json:"bytes"`
	CreatedAt string `json:"created_at"`
}

// List returns every checkpoint, oldest first.
func (s *Store) List() []Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Summary, 0, len(s.cps))
	for _, m := range s.cps {
		out = append(out, m.summary())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Stored returns the bytes of content the store holds.
func (s *Store) Stored() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored
}

// Get returns checkpoint id or, for "HEAD", the newest of path.
func (s *Store) Get(id, path string) (*Manifest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "HEAD" {
		var head *Manifest
		for _, m := range s.cps {
			if m.Path == path && (head == nil || m.Seq > head.Seq) {
				head = m
			}
		}
		if head == nil {
			return nil, fmt.Errorf("%w of %s (HEAD)", ErrNotFound, path)
		}
		return head, nil
	}
	m, ok := s.cps[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return m, nil
}

// Delete removes checkpoint id and frees the content no other uses, and
// returns how many bytes of content it freed (of Stored and the budget).
// The disk is given back at once: packs left with no live content are
// removed, and those left less than half live are compacted (DiskBytes).
func (s *Store) Delete(id string) (int64, error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	m, ok := s.cps[id]
	if ok {
		delete(s.cps, id)
	}
	s.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err := os.Remove(filepath.Join(s.manDir(), id+".json")); err != nil {
		return 0, err
	}
	var freed int64
	touched := map[string]bool{}
	s.mu.Lock()
	for _, f := range m.Files {
		if f.SHA256 == "" {
			continue
		}
		if s.refs[f.SHA256]--; s.refs[f.SHA256] > 0 {
			continue
		}
		delete(s.refs, f.SHA256)
		l, ok := s.locs[f.SHA256]
		if !ok {
			continue // missing already
		}
		delete(s.locs, f.SHA256)
		s.stored -= l.n
		freed += l.n
		if l.pack == "" {
			_ = os.Remove(s.objPath(f.SHA256))
			continue
		}
		s.packs[l.pack].live -= recHeader + l.n
		touched[l.pack] = true
	}
	s.mu.Unlock()
	return freed, s.gc(touched)
}

// DiskBytes returns the bytes of the store's packs, their indexes and
// object files on disk: Stored, plus the record headers and indexes, plus
// content no checkpoint uses any more in packs at least half live
// (compacted once they are not).
func (s *Store) DiskBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.packs {
		n += p.size + p.idx
	}
	for _, l := range s.locs {
		if l.pack == "" {
			n += l.n
		}
	}
	return n
}

// Budget returns the store's byte budget.
func (s *Store) Budget() int64 { return s.budget }
