package checkpoint

import (
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"os"
	"sync"
)

// copier copies files into new packs as they are hashed, keeping one
// object per content. Each goroutine that puts writes a pack of its own
// (its slot), so that the writes need no lock and are a few large ones.
type copier struct {
	s *Store
	// mu guards copied and writers, and makes the check that an object
	// is new and its taking one step.
	mu      sync.Mutex
	copied  map[string]loc // the objects written, by hash
	writers []*packWriter
	packs   map[string]*packInfo // the packs made durable by finish
}

// put copies the file rel of t into the pack of *slot (started, or a new one
// begun past packMax) while hashing it with h, unless the store, or
// another put, has its content already. buf is smallMax+1 bytes: a file
// that fits is read whole, and written only if it is new; a bigger one, or
// one that grew while read, is streamed into the pack, and taken back if
// it was not new.
func (c *copier) put(t *tree, rel string, h hash.Hash, buf []byte, slot **packWriter) (string, int64, error) {
	f, size, err := t.openRegular(rel)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	// One read of one byte more than the file's size: a short read of a
	// regular file is its end, so the read that would say EOF is saved.
	want := int(min(size+1, int64(len(buf))))
	n, err := io.ReadAtLeast(f, buf[:want], 1)
	if errors.Is(err, io.EOF) {
		n, err = 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	if n < want {
		h.Reset()
		h.Write(buf[:n])
		raw := h.Sum(nil)
		sum := hex.EncodeToString(raw)
		if !c.claim(sum) {
			return sum, int64(n), nil // held already: no pack begun for it
		}
		pw, err := c.writer(slot)
		if err != nil {
			return "", 0, err
		}
		l, err := pw.add(raw, buf[:n])
		c.mu.Lock()
		c.copied[sum] = l
		c.mu.Unlock()
		return sum, int64(n), err
	}
	pw, err := c.writer(slot)
	if err != nil {
		return "", 0, err
	}
	start := pw.off
	sum, l, err := pw.stream(h, buf[:n], f, buf)
	if err != nil {
		return "", 0, err
	}
	if !c.claim(sum) {
		return sum, l.n, pw.undo(start)
	}
	c.mu.Lock()
	c.copied[sum] = l
	c.mu.Unlock()
	return sum, l.n, nil
}

// claim reports whether content sum is neither in the store nor copied,
// and if so marks it copied.
func (c *copier) claim(sum string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.copied[sum]; ok {
		return false
	}
	c.s.mu.Lock()
	_, held := c.s.locs[sum]
	c.s.mu.Unlock()
	if held {
		return false
	}
	c.copied[sum] = loc{}
	return true
}

// writer returns the pack writer of slot, starting one if it has none or
// its pack is past packMax.
func (c *copier) writer(slot **packWriter) (*packWriter, error) {
	if *slot != nil && (*slot).off < packMax {
		return *slot, nil
	}
	pw, err := c.s.newPackWriter()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.writers = append(c.writers, pw)
	c.mu.Unlock()
	*slot = pw
	return pw, nil
}

// finish makes the packs written durable in packs/, syncing them all at
// once; empty ones are dropped. Only then may a manifest name their
// content.
func (c *copier) finish() error {
	c.packs = map[string]*packInfo{}
	var full []*packWriter
	for _, pw := range c.writers {
		if len(pw.ents) == 0 {
			pw.discard()
		} else {
			full = append(full, pw)
		}
	}
	errs := make([]error, len(full))
	var wg sync.WaitGroup
	for i, pw := range full {
		wg.Add(1)
		go syncPack(&wg, pw, &errs[i])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, pw := range full {
		info, err := pw.finish(c.s)
		if err != nil {
			return err
		}
		c.packs[pw.name] = info
	}
	if len(full) == 0 {
		return nil
	}
	return syncPath(c.s.packDir())
}

// syncPack syncs pw, and puts the error in *err.
//
// syncPack runs in its own goroutine; it ends when the pack is on disk.
func syncPack(wg *sync.WaitGroup, pw *packWriter, err *error) {
	defer wg.Done()
	*err = pw.sync()
}

// abort removes every pack written, in tmp/ or packs/.
func (c *copier) abort() {
	for _, pw := range c.writers {
		pw.discard()
		_ = os.Remove(c.s.packPath(pw.name, ".idx"))
		_ = os.Remove(c.s.packPath(pw.name, ".pack"))
	}
}

// bytes returns the content bytes copied.
func (c *copier) bytes() int64 {
	var n int64
	for _, l := range c.copied {
		n += l.n
	}
	return n
}
