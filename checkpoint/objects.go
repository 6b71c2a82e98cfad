package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrDamaged is returned when a checkpoint's content is missing from the
// store (its pack was cut short or removed by hand).
var ErrDamaged = errors.New("checkpoint content missing from the store")

// loadPacks reads the index of every pack in packs/ and locates the
// objects the checkpoints use. An index that is missing or does not check
// out, or that names content past its pack's end, is rebuilt from the
// pack's records, and the pack cut after its last whole one; an index
// without its pack is removed. s.mu need not be held: only Open calls it.
func (s *Store) loadPacks() error {
	ents, err := os.ReadDir(s.packDir())
	if err != nil {
		return err
	}
	for _, e := range ents {
		name, ext := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), filepath.Ext(e.Name())
		if ext == ".idx" {
			if _, err := os.Stat(s.packPath(name, ".pack")); errors.Is(err, fs.ErrNotExist) {
				_ = os.Remove(s.packPath(name, ".idx"))
			}
			continue
		}
		if ext != ".pack" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		idx, ok := s.readIdx(name)
		if ok && !within(idx, fi.Size()) {
			ok = false
		}
		size := fi.Size()
		if !ok {
			if idx, size, err = s.repairPack(name); err != nil {
				return err
			}
		}
		p := &packInfo{size: size, idx: idxSize(len(idx))}
		s.packs[name] = p
		for _, x := range idx {
			if _, dup := s.locs[x.sum]; s.refs[x.sum] > 0 && !dup {
				s.locs[x.sum] = loc{pack: name, off: x.off, n: x.n}
				p.live += recHeader + x.n
			}
		}
	}
	return nil
}

func idxSize(n int) int64 { return int64(len(idxMagic) + 8 + n*idxEntry + 32) }

func within(idx []idxEnt, size int64) bool {
	for _, x := range idx {
		if x.off < int64(len(packMagic))+recHeader || x.off+x.n > size {
			return false
		}
	}
	return true
}

// repairPack rebuilds the index of pack name from its records, cutting
// the pack after the last whole one, and returns them and its new size.
func (s *Store) repairPack(name string) ([]idxEnt, int64, error) {
	idx, end, err := s.scanPack(name)
	if err != nil {
		return nil, 0, err
	}
	if err := os.Truncate(s.packPath(name, ".pack"), end); err != nil {
		return nil, 0, err
	}
	if _, err := s.writeIdx(name, idx); err != nil {
		return nil, 0, err
	}
	return idx, end, syncPath(s.packDir())
}

// loadLoose locates the objects of the old layout (one file each, under
// objects/) that the checkpoints use, and removes the others once stale.
func (s *Store) loadLoose() {
	_ = filepath.WalkDir(s.objDir(), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		sum := filepath.Base(filepath.Dir(p)) + d.Name()
		_, located := s.locs[sum]
		switch fi, err := d.Info(); {
		case err != nil:
		case s.refs[sum] > 0 && !located:
			s.locs[sum] = loc{n: fi.Size()}
		case stale(d):
			_ = os.Remove(p)
		}
		return nil
	})
}

// removePack removes pack name, its index first: a pack without one is
// read again at Open, an index without its pack dropped.
func (s *Store) removePack(name string) {
	_ = os.Remove(s.packPath(name, ".idx"))
	_ = os.Remove(s.packPath(name, ".pack"))
	delete(s.packs, name)
}

// gc removes the touched packs left with no live content and compacts
// those left less than half live. s.op must be held.
func (s *Store) gc(touched map[string]bool) error {
	for name := range touched {
		s.mu.Lock()
		p := s.packs[name]
		s.mu.Unlock()
		switch {
		case p == nil:
		case p.live == 0:
			s.mu.Lock()
			s.removePack(name)
			s.mu.Unlock()
		case p.live*2 < p.size:
			if err := s.compact(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// compact copies pack name's live objects into a new pack, made durable
// before the old one is removed (a crash between the two leaves both,
// and Open takes either copy). s.op must be held: the live objects it
// lists do not move until it has copied them.
func (s *Store) compact(name string) error {
	s.mu.Lock()
	live := map[string]loc{}
	for sum, l := range s.locs {
		if l.pack == name {
			live[sum] = l
		}
	}
	s.mu.Unlock()
	src, err := os.Open(s.packPath(name, ".pack"))
	if err != nil {
		return err
	}
	defer src.Close()
	pw, err := s.newPackWriter()
	if err != nil {
		return err
	}
	moved := map[string]loc{}
	buf := make([]byte, 256<<10)
	for sum, l := range live {
		got, nl, err := pw.stream(newHash(), nil, io.NewSectionReader(src, l.off, l.n), buf)
		if err == nil && got != sum {
			err = fmt.Errorf("%w: pack %s holds %s where %s should be", ErrDamaged, name, got, sum)
		}
		if err != nil {
			pw.discard()
			return err
		}
		moved[sum] = nl
	}
	err = pw.sync()
	var info *packInfo
	if err == nil {
		info, err = pw.finish(s)
	}
	if err == nil {
		err = syncPath(s.packDir())
	}
	if err != nil {
		pw.discard()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sum, l := range moved {
		s.locs[sum] = l
		info.live += recHeader + l.n
	}
	s.packs[pw.name] = info
	s.removePack(name)
	return nil
}

// openObject opens the content sum for reading; the caller closes it.
func (s *Store) openObject(sum string) (io.ReadCloser, error) {
	for range 3 { // a compaction may move it between the look-up and the open
		s.mu.Lock()
		l, ok := s.locs[sum]
		s.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrDamaged, sum)
		}
		p := s.objPath(sum)
		if l.pack != "" {
			p = s.packPath(l.pack, ".pack")
		}
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if l.pack == "" {
			return f, nil
		}
		return packReader{io.NewSectionReader(f, l.off, l.n), f}, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrDamaged, sum)
}

type packReader struct {
	*io.SectionReader
	f *os.File
}

func (r packReader) Close() error { return r.f.Close() }

// missing returns the contents of m the store does not hold.
func (s *Store) missing(m *Manifest) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, f := range m.Files {
		if _, ok := s.locs[f.SHA256]; f.SHA256 != "" && !ok {
			out = append(out, f.Rel)
		}
	}
	return out
}
