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

	"golang.org/x/sys/unix"
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
	files, dirs, err := scan(root, exclude)
	if err != nil {
		return nil, err
	}
	m := &Manifest{ID: newID(), Path: root, Name: name, Exclude: exclude, CreatedAt: now(),
		Files: files, Dirs: dirs, RootMode: modeBits(fi.Mode())}
	s.reuseHashes(m)
	copied, err := s.store(ctx, root, m.Files)
	if err == nil {
		m.Files = dropGone(m.Files)
		m.Bytes = sumSizes(copied)
		err = s.commit(m, copied)
	}
	if err != nil {
		for sum := range copied {
			_ = os.Remove(s.objPath(sum))
		}
		return nil, err
	}
	return m, nil
}

func newHash() hash.Hash { return sha256.New() }

// store hashes the files that have no hash yet and copies the content
// the store lacks, and returns the objects it made. If the files to read
// may all be new without passing the budget, each is hashed and copied in
// one read, and the copies of content already held dropped; else they are
// hashed first, and copied only if what is new fits: either way the
// budget is checked before anything is copied.
func (s *Store) store(ctx context.Context, root string, files []Entry) (map[string]int64, error) {
	var unread int64
	for _, f := range files {
		if f.SHA256 == "" && f.Link == "" {
			unread += f.Size
		}
	}
	copied := map[string]int64{}
	if s.Stored()+unread <= s.budget {
		err := s.hashAll(ctx, root, files, &copier{s: s, copied: copied})
		if err == nil {
			err = syncDir(s.objDir())
		}
		return copied, err
	}
	if err := s.hashAll(ctx, root, files, nil); err != nil {
		return copied, err
	}
	files = dropGone(files)
	fresh, need := s.newContent(files)
	if s.Stored()+need > s.budget {
		return copied, fmt.Errorf("%w: the checkpoint needs %d bytes of new content, and the store holds %d of its checkpoint budget %s (-checkpoint-budget)",
			ErrBudget, need, s.Stored(), s.budgetText)
	}
	return s.copyAll(ctx, root, files, fresh)
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
// files whose size and mtime have not changed.
func (s *Store) reuseHashes(m *Manifest) {
	head, err := s.Get("HEAD", m.Path)
	if err != nil {
		return
	}
	prev := make(map[string]*Entry, len(head.Files))
	for i := range head.Files {
		prev[head.Files[i].Rel] = &head.Files[i]
	}
	for i := range m.Files {
		f := &m.Files[i]
		if p := prev[f.Rel]; p != nil && f.Link == "" && p.SHA256 != "" && p.Size == f.Size && p.MTime == f.MTime {
			f.SHA256 = p.SHA256
		}
	}
}

// hashAll hashes the regular files that have no hash yet, a few at once,
// and, with cp, copies them into the store as it reads them.
func (s *Store) hashAll(ctx context.Context, root string, files []Entry, cp *copier) error {
	work := make(chan int)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range hashWorkers() {
		wg.Add(1)
		go hashFiles(&wg, work, errc, root, files, cp)
	}
	var err error
feed:
	for i := range files {
		if files[i].SHA256 != "" || files[i].Link != "" {
			continue
		}
		select {
		case work <- i:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// hashFiles hashes files[i] for each i from work; the first error goes to
// errc if it has room.
//
// hashFiles runs in its own goroutine; it ends when work is closed.
func hashFiles(wg *sync.WaitGroup, work <-chan int, errc chan<- error, root string, files []Entry, cp *copier) {
	defer wg.Done()
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for i := range work {
		p := filepath.Join(root, filepath.FromSlash(files[i].Rel))
		var sum string
		var n int64
		var err error
		if cp != nil {
			sum, n, err = cp.put(p, h, buf)
		} else {
			sum, n, err = hashFile(p, h, buf, nil)
		}
		if errors.Is(err, fs.ErrNotExist) {
			files[i].Rel = "" // gone since the scan: not recorded
			continue
		}
		if err != nil {
			select {
			case errc <- err:
			default:
			}
			continue
		}
		files[i].SHA256, files[i].Size = sum, n
	}
}

// hashFile reads the regular file p, without following a link, into h
// and, if w is not nil, w; it returns the sha256 in hex and the bytes
// read.
func hashFile(p string, h hash.Hash, buf []byte, w io.Writer) (string, int64, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return "", 0, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", 0, &fs.PathError{Op: "open", Path: p, Err: errors.New("not a regular file any more")}
	}
	h.Reset()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.CopyBuffer(dst, struct{ io.Reader }{f}, buf)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copier copies files into the store as they are hashed, keeping one
// object per content.
type copier struct {
	s *Store
	// mu guards copied, and makes the check that an object is new and
	// its making one step.
	mu     sync.Mutex
	copied map[string]int64 // the objects made, by hash
}

// put copies the file p to a temporary file while hashing it, then makes
// it the object of its hash unless the store, or another put, has one.
func (c *copier) put(p string, h hash.Hash, buf []byte) (string, int64, error) {
	tmp, err := os.CreateTemp(c.s.tmpDir(), "obj-")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	sum, n, err := hashFile(p, h, buf, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.copied[sum]; ok || c.s.holds(sum) {
		return sum, n, nil
	}
	if err := c.s.putObject(tmp.Name(), sum); err != nil {
		return "", 0, err
	}
	c.copied[sum] = n
	return sum, n, nil
}

// holds reports whether the store has the object sum.
func (s *Store) holds(sum string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs[sum] > 0
}

// newContent returns the first file of each content the store does not
// hold, by hash, and their total size.
func (s *Store) newContent(files []Entry) (map[string]int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := map[string]int{}
	var need int64
	for i, f := range files {
		if f.SHA256 == "" || s.refs[f.SHA256] > 0 {
			continue
		}
		if _, ok := fresh[f.SHA256]; !ok {
			fresh[f.SHA256] = i
			need += f.Size
		}
	}
	return fresh, need
}

// copyAll copies each new content into the store, and returns the sizes
// of the objects it made by hash. A file that changed since it was
// hashed is stored as it is now, and its entries take the new hash.
func (s *Store) copyAll(ctx context.Context, root string, files []Entry, fresh map[string]int) (map[string]int64, error) {
	copied := map[string]int64{}
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for sum, i := range fresh {
		if err := ctx.Err(); err != nil {
			return copied, err
		}
		got, n, err := s.copyOne(filepath.Join(root, filepath.FromSlash(files[i].Rel)), h, buf)
		if err != nil {
			return copied, err
		}
		copied[got] = n
		if got != sum {
			for j := range files {
				if files[j].SHA256 == sum {
					files[j].SHA256, files[j].Size = got, n
				}
			}
		}
	}
	if err := syncDir(s.objDir()); err != nil {
		return copied, err
	}
	return copied, nil
}

// copyOne copies the file p into a new object, named by its hash.
func (s *Store) copyOne(p string, h hash.Hash, buf []byte) (string, int64, error) {
	tmp, err := os.CreateTemp(s.tmpDir(), "obj-")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	sum, n, err := hashFile(p, h, buf, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	return sum, n, s.putObject(tmp.Name(), sum)
}

// syncDir flushes the file system that holds dir: one syncfs for every
// object, rather than an fsync each.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

func sumSizes(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// commit writes m's manifest atomically and adds it to the index.
func (s *Store) commit(m *Manifest, copied map[string]int64) error {
	s.mu.Lock()
	for _, c := range s.cps {
		m.Seq = max(m.Seq, c.Seq)
	}
	m.Seq++
	s.mu.Unlock()
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.tmpDir(), "manifest-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.manDir(), m.ID+".json"))
	}
	if err != nil {
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
	for sum, n := range copied {
		if _, ok := s.sizes[sum]; !ok {
			s.sizes[sum] = n
			s.stored += n
		}
	}
	return nil
}
