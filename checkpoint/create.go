package checkpoint

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// hashWorkers is how many files are hashed at once: reading is mostly
// from the page cache, so about one per CPU.
func hashWorkers() int { return max(2, runtime.GOMAXPROCS(0)) }

// Create records the directory path (absolute, cleaned), leaving out the
// default excludes and the globs of exclude, and stores the content the
// store does not hold yet. A file whose size and mtime are those of the
// path's last checkpoint keeps that checkpoint's hash unread, as git's
// index does. Past the budget it returns an error wrapping ErrBudget and
// stores nothing; on any error nothing is left.
func (s *Store) Create(ctx context.Context, root, name string, exclude []string) (*Manifest, error) {
	fi, err := os.Stat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoPath, root)
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNotDir, root)
	}
	s.op.Lock()
	defer s.op.Unlock()
	t, err := openTree(root)
	if err != nil {
		return nil, err
	}
	defer t.close()
	files, dirs, err := scan(t, exclude)
	if err != nil {
		return nil, err
	}
	m := &Manifest{ID: newID(), Path: root, Name: name, Exclude: exclude, CreatedAt: now(),
		Files: files, Dirs: dirs, RootMode: modeBits(fi.Mode())}
	s.reuseHashes(m)
	cp := &copier{s: s, copied: map[string]loc{}}
	err = s.store(ctx, t, m.Files, cp)
	if err == nil {
		m.Files = dropGone(m.Files)
		m.Bytes = cp.bytes()
		err = s.commit(m, cp)
	}
	if err != nil {
		cp.abort()
		return nil, err
	}
	return m, nil
}

func newHash() hash.Hash { return sha256.New() }

// store hashes the files that have no hash yet and copies the content
// the store lacks into cp's packs. If the files to read may all be new
// without passing the budget, each is hashed and copied in one read, and
// the copies of content already held dropped; else they are hashed
// first, and copied only if what is new fits: either way the budget is
// checked before anything is copied.
func (s *Store) store(ctx context.Context, t *tree, files []Entry, cp *copier) error {
	var unread int64
	for _, f := range files {
		if f.SHA256 == "" && f.Link == "" {
			unread += f.Size
		}
	}
	if s.Stored()+unread <= s.budget {
		return s.hashAll(ctx, t, files, cp)
	}
	if err := s.hashAll(ctx, t, files, nil); err != nil {
		return err
	}
	files = dropGone(files)
	fresh, need := s.newContent(files)
	if s.Stored()+need > s.budget {
		return fmt.Errorf("%w: the checkpoint needs %d bytes of new content, and the store holds %d of its checkpoint budget %s (-checkpoint-budget)",
			ErrBudget, need, s.Stored(), s.budgetText)
	}
	return s.copyAll(ctx, t, files, fresh, cp)
}

// dropGone removes the files found gone when they were read.
func dropGone(files []Entry) []Entry {
	return slices.DeleteFunc(files, func(e Entry) bool { return e.Rel == "" })
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "cp-" + hex.EncodeToString(b[:])
}

// reuseHashes takes the hashes of the path's last checkpoint for the
// files whose size and mtime have not changed, and whose content the
// store holds (a damaged pack's is read and stored again). Both lists
// are sorted by path, and walked side by side.
func (s *Store) reuseHashes(m *Manifest) {
	head, err := s.Get("HEAD", m.Path)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := head.Files
	for i, j := 0, 0; i < len(m.Files) && j < len(prev); {
		f, p := &m.Files[i], &prev[j]
		switch {
		case f.Rel < p.Rel:
			i++
			continue
		case f.Rel > p.Rel:
			j++
			continue
		}
		i, j = i+1, j+1
		if f.Link == "" && p.SHA256 != "" && p.Size == f.Size && p.MTime == f.MTime {
			if _, held := s.locs[p.SHA256]; held {
				f.SHA256 = p.SHA256
			}
		}
	}
}

// hashAll hashes the regular files that have no hash yet, a few at once,
// and, with cp, copies them into the store as it reads them. The workers
// take the next file from a shared counter, not a channel: 10,000 small
// files are 10,000 hand-offs otherwise.
func (s *Store) hashAll(ctx context.Context, t *tree, files []Entry, cp *copier) error {
	h := &hashing{t: t, files: files, cp: cp}
	errs := make([]error, hashWorkers())
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go h.work(ctx, &wg, &errs[i])
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// hashing is one hashAll's shared state.
type hashing struct {
	t     *tree
	files []Entry // each worker writes only the entries it took
	cp    *copier
	next  atomic.Int64 // the next index to take; len(files) or more once stopped
}

// work hashes files until none is left, the context ends or a file
// fails; then it stops the others, and puts its error in *errp.
//
// work runs in its own goroutine; it ends when no file is left to take.
// hashAll waits for it.
func (h *hashing) work(ctx context.Context, wg *sync.WaitGroup, errp *error) {
	defer wg.Done()
	hs := sha256.New()
	var buf []byte
	var slot *packWriter
	if h.cp != nil {
		buf = make([]byte, smallMax+1)
	} else {
		buf = make([]byte, 256<<10)
	}
	for {
		i := int(h.next.Add(1) - 1)
		if i >= len(h.files) {
			return
		}
		f := &h.files[i]
		if f.SHA256 != "" || f.Link != "" {
			continue
		}
		err := ctx.Err()
		if err == nil {
			err = h.one(f, hs, buf, &slot)
		}
		if err != nil {
			*errp = err
			h.next.Store(int64(len(h.files))) // the others stop at their next file
			return
		}
	}
}

// one hashes (and copies) the file of f and records its hash and size;
// a file gone since the scan is marked so, with an empty Rel.
func (h *hashing) one(f *Entry, hs hash.Hash, buf []byte, slot **packWriter) error {
	var sum string
	var n int64
	var err error
	if h.cp != nil {
		sum, n, err = h.cp.put(h.t, f.Rel, hs, buf, slot)
	} else {
		sum, n, err = hashFile(h.t, f.Rel, hs, buf)
	}
	if errors.Is(err, fs.ErrNotExist) {
		f.Rel = "" // gone since the scan: not recorded
		return nil
	}
	if err != nil {
		return err
	}
	f.SHA256, f.Size = sum, n
	return nil
}

// hashFile reads the regular file rel of t, without following a link,
// into h and returns the sha256 in hex and the bytes read.
func hashFile(t *tree, rel string, h hash.Hash, buf []byte) (string, int64, error) {
	f, _, err := t.openRegular(rel)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h.Reset()
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// newContent returns the first file of each content the store does not
// hold, by hash, and their total size.
func (s *Store) newContent(files []Entry) (map[string]int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := map[string]int{}
	var need int64
	for i, f := range files {
		if _, held := s.locs[f.SHA256]; f.SHA256 == "" || held {
			continue
		}
		if _, ok := fresh[f.SHA256]; !ok {
			fresh[f.SHA256] = i
			need += f.Size
		}
	}
	return fresh, need
}

// copyAll copies each new content into cp's packs. A file that changed
// since it was hashed is stored as it is now, and its entries take the
// new hash.
func (s *Store) copyAll(ctx context.Context, t *tree, files []Entry, fresh map[string]int, cp *copier) error {
	h := sha256.New()
	buf := make([]byte, smallMax+1)
	var slot *packWriter
	for sum, i := range fresh {
		if err := ctx.Err(); err != nil {
			return err
		}
		got, n, err := cp.put(t, files[i].Rel, h, buf, &slot)
		if err != nil {
			return err
		}
		if got != sum {
			for j := range files {
				if files[j].SHA256 == sum {
					files[j].SHA256, files[j].Size = got, n
				}
			}
		}
	}
	return nil
}

// commit makes cp's packs durable, then m's manifest, and adds both to
// the index. The manifest is encoded and written to a synced temporary
// file while the packs sync, and renamed into manifests/ only once they
// are on disk.
func (s *Store) commit(m *Manifest, cp *copier) error {
	s.mu.Lock()
	for _, c := range s.cps {
		m.Seq = max(m.Seq, c.Seq)
	}
	m.Seq++
	s.mu.Unlock()
	finished := make(chan error, 1)
	go finishPacks(cp, finished)
	data, err := json.Marshal(m)
	var tmp string
	if err == nil {
		tmp, err = s.writeTemp("manifest-", data, true)
	}
	if tmp != "" {
		defer os.Remove(tmp) // a no-op once renamed
	}
	if ferr := <-finished; err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	final := filepath.Join(s.manDir(), m.ID+".json")
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	if err := syncPath(s.manDir()); err != nil {
		_ = os.Remove(final) // before its packs are: nothing half-made
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cps[m.ID] = m
	for _, f := range m.Files {
		if f.SHA256 != "" {
			s.refs[f.SHA256]++
		}
	}
	for name, p := range cp.packs {
		s.packs[name] = p
	}
	for sum, l := range cp.copied {
		if _, ok := s.locs[sum]; !ok && s.refs[sum] > 0 {
			s.locs[sum] = l
			s.stored += l.n
			s.packs[l.pack].live += recHeader + l.n
		}
	}
	for name, p := range cp.packs {
		if p.live == 0 { // its content was all found gone: never named
			s.removePack(name)
		}
	}
	return nil
}

// finishPacks sends cp.finish's result to done.
//
// finishPacks runs in its own goroutine; it ends when the packs are
// durable or failed. commit waits for it.
func finishPacks(cp *copier, done chan<- error) { done <- cp.finish() }
