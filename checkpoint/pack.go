package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A pack is an append-only file of many objects, so that a checkpoint of
// 10,000 files writes a few large files rather than 10,000 small ones.
// Its index (the .idx file next to it) maps each object's sha256 to its
// offset and length. Both are written in the store's tmp directory,
// synced, and renamed into packs/ (the pack first, then its index, then
// the directory synced) before any manifest names their content: a
// manifest never names content that is not durably stored.
//
// A pack is "SXPACK1\n" and then records, each a 40-byte header (the
// content's sha256, its length as a big-endian uint64) and the content.
// An index is "SXIDX01\n", the count as a big-endian uint64, 48-byte
// entries (sha256, the content's offset, its length) and the sha256 of
// all that: an index that does not check out is rebuilt from its pack,
// whose records say the same, verifying each content's hash.
const (
	packMagic = "SXPACK1\n"
	idxMagic  = "SXIDX01\n"
	recHeader = 32 + 8
	idxEntry  = 32 + 8 + 8
	// packMax is the size past which a writer starts a new pack, so that
	// compacting one (after deletes) copies at most half of it.
	packMax = 64 << 20
	// smallMax is the size up to which a file is read whole before its
	// record is written; a bigger one is streamed into its record.
	smallMax = 1 << 20
	// writeBack is how much a writer buffers in the page cache before it
	// asks the kernel to start writing it out, so that the sync at the
	// end waits for little.
	writeBack = 8 << 20
)

// loc is where an object's content is: in pack at off, n bytes long; a
// pack of "" is an object file of the old layout (objects/xx/yyyy).
type loc struct {
	pack string
	off  int64
	n    int64
}

// packInfo is what the store knows of one pack in packs/.
type packInfo struct {
	size int64 // the pack file's bytes
	idx  int64 // its index's
	live int64 // bytes of the records (header and content) a checkpoint uses
}

type idxEnt struct {
	sum string // hex
	off int64
	n   int64
}

func (s *Store) packDir() string                  { return filepath.Join(s.dir, "packs") }
func (s *Store) packPath(name, ext string) string { return filepath.Join(s.packDir(), name+ext) }

func newPackName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "pack-" + hex.EncodeToString(b[:])
}

// packWriter writes one new pack in the tmp directory. It is used by one
// goroutine at a time.
type packWriter struct {
	name    string
	f       *os.File
	w       *bufio.Writer
	off     int64    // bytes written, buffered ones included
	started int64    // bytes whose write-back was started
	ents    []idxEnt // what the index will say
	hdr     [recHeader]byte
}

func (s *Store) newPackWriter() (*packWriter, error) {
	name := newPackName()
	f, err := os.OpenFile(filepath.Join(s.tmpDir(), name+".pack"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	pw := &packWriter{name: name, f: f, w: bufio.NewWriterSize(f, 1<<20)}
	if _, err := pw.w.WriteString(packMagic); err != nil {
		pw.discard()
		return nil, err
	}
	pw.off = int64(len(packMagic))
	return pw, nil
}

func (pw *packWriter) header(sum []byte, n int64) []byte {
	copy(pw.hdr[:32], sum)
	binary.BigEndian.PutUint64(pw.hdr[32:], uint64(n))
	return pw.hdr[:]
}

// add appends one whole object, data, of hash sum (raw), and returns its
// location.
func (pw *packWriter) add(sum []byte, data []byte) (loc, error) {
	if _, err := pw.w.Write(pw.header(sum, int64(len(data)))); err != nil {
		return loc{}, err
	}
	if _, err := pw.w.Write(data); err != nil {
		return loc{}, err
	}
	l := loc{pack: pw.name, off: pw.off + recHeader, n: int64(len(data))}
	pw.off += recHeader + int64(len(data))
	pw.ents = append(pw.ents, idxEnt{sum: hex.EncodeToString(sum), off: l.off, n: l.n})
	return l, pw.kick()
}

// stream appends an object whose content is prefix then the rest of r,
// hashing it into h (reset) as it goes: its header is written once the hash is
// known. It returns the hash (hex) and location.
func (pw *packWriter) stream(h hash.Hash, prefix []byte, r io.Reader, buf []byte) (string, loc, error) {
	start := pw.off
	h.Reset()
	if _, err := pw.w.Write(pw.header(make([]byte, 32), 0)); err != nil { // a placeholder
		return "", loc{}, err
	}
	dst := io.MultiWriter(h, pw.w)
	if _, err := dst.Write(prefix); err != nil {
		return "", loc{}, err
	}
	n, err := io.CopyBuffer(dst, struct{ io.Reader }{r}, buf)
	if err != nil {
		return "", loc{}, err
	}
	n += int64(len(prefix))
	if err := pw.w.Flush(); err != nil {
		return "", loc{}, err
	}
	sum := h.Sum(nil)
	if _, err := pw.f.WriteAt(pw.header(sum, n), start); err != nil {
		return "", loc{}, err
	}
	l := loc{pack: pw.name, off: start + recHeader, n: n}
	pw.off = l.off + n
	hexSum := hex.EncodeToString(sum)
	pw.ents = append(pw.ents, idxEnt{sum: hexSum, off: l.off, n: n})
	return hexSum, l, pw.kick()
}

// undo takes back the last object, written from start: another worker
// stored the same content meanwhile.
func (pw *packWriter) undo(start int64) error {
	if err := pw.w.Flush(); err != nil {
		return err
	}
	if err := pw.f.Truncate(start); err != nil {
		return err
	}
	if _, err := pw.f.Seek(start, io.SeekStart); err != nil {
		return err
	}
	pw.off = start
	pw.started = min(pw.started, start)
	pw.ents = pw.ents[:len(pw.ents)-1]
	return nil
}

// kick starts the write-back of what was written since the last kick,
// once there is writeBack of it, without waiting for it.
func (pw *packWriter) kick() error {
	if pw.off-pw.started < writeBack {
		return nil
	}
	if err := pw.w.Flush(); err != nil {
		return err
	}
	_ = unix.SyncFileRange(int(pw.f.Fd()), pw.started, pw.off-pw.started, unix.SYNC_FILE_RANGE_WRITE)
	pw.started = pw.off
	return nil
}

// sync flushes the pack and waits until it is on disk.
func (pw *packWriter) sync() error {
	if err := pw.w.Flush(); err != nil {
		return err
	}
	return unix.Fdatasync(int(pw.f.Fd()))
}

// finish renames the synced pack into packs/ and writes its index there.
// The index is not synced: it is only a faster way to read the pack's
// records, and Open rebuilds one that a crash left missing or torn. The
// caller syncs packs/ afterwards, for the renames.
func (pw *packWriter) finish(s *Store) (*packInfo, error) {
	err := pw.f.Close()
	if err == nil {
		err = os.Rename(pw.f.Name(), s.packPath(pw.name, ".pack"))
	}
	var idx int64
	if err == nil {
		idx, err = s.writeIdx(pw.name, pw.ents)
	}
	if err != nil {
		return nil, err
	}
	return &packInfo{size: pw.off, idx: idx}, nil
}

// discard closes and removes the pack, wherever it got to.
func (pw *packWriter) discard() {
	_ = pw.f.Close()
	_ = os.Remove(pw.f.Name())
}

// writeIdx writes the index of pack name atomically, and returns its
// size.
func (s *Store) writeIdx(name string, ents []idxEnt) (int64, error) {
	b := make([]byte, 0, idxSize(len(ents)))
	b = append(b, idxMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(ents)))
	for _, e := range ents {
		raw, err := hex.DecodeString(e.sum)
		if err != nil || len(raw) != 32 {
			return 0, fmt.Errorf("bad object hash %q", e.sum)
		}
		b = append(b, raw...)
		b = binary.BigEndian.AppendUint64(b, uint64(e.off))
		b = binary.BigEndian.AppendUint64(b, uint64(e.n))
	}
	sum := sha256.Sum256(b)
	b = append(b, sum[:]...)
	return int64(len(b)), s.writeAtomic(s.packPath(name, ".idx"), "idx-", b)
}

// writeAtomic writes data to p through a temporary file, not synced.
func (s *Store) writeAtomic(p, prefix string, data []byte) error {
	tmp, err := s.writeTemp(prefix, data, false)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes data to a new file in tmp/, synced if sync, and
// returns its path; on an error it leaves nothing.
func (s *Store) writeTemp(prefix string, data []byte, sync bool) (string, error) {
	tmp, err := os.CreateTemp(s.tmpDir(), prefix)
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(data)
	if err == nil && sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// readIdx reads the index of pack name; ok is false if it is missing,
// short or does not check out.
func (s *Store) readIdx(name string) (ents []idxEnt, ok bool) {
	b, err := os.ReadFile(s.packPath(name, ".idx"))
	if err != nil || len(b) < len(idxMagic)+8+32 || string(b[:len(idxMagic)]) != idxMagic {
		return nil, false
	}
	body, tail := b[:len(b)-32], b[len(b)-32:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], tail) {
		return nil, false
	}
	count := binary.BigEndian.Uint64(body[len(idxMagic):])
	rest := body[len(idxMagic)+8:]
	if uint64(len(rest)) != count*idxEntry {
		return nil, false
	}
	ents = make([]idxEnt, 0, count)
	for ; len(rest) > 0; rest = rest[idxEntry:] {
		ents = append(ents, idxEnt{sum: hex.EncodeToString(rest[:32]),
			off: int64(binary.BigEndian.Uint64(rest[32:])), n: int64(binary.BigEndian.Uint64(rest[40:]))})
	}
	return ents, true
}

// scanPack reads pack name's records, verifying each content's hash, up
// to the first that is cut short or does not check out, and returns them
// and where they end.
func (s *Store) scanPack(name string) ([]idxEnt, int64, error) {
	f, err := os.Open(s.packPath(name, ".pack"))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	magic := make([]byte, len(packMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != packMagic {
		return nil, 0, nil
	}
	var ents []idxEnt
	off := int64(len(packMagic))
	h := sha256.New()
	var hdr [recHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return ents, off, nil
		}
		n := int64(binary.BigEndian.Uint64(hdr[32:]))
		h.Reset()
		if got, err := io.CopyN(h, r, n); err != nil || got != n || !bytes.Equal(h.Sum(nil), hdr[:32]) {
			return ents, off, nil
		}
		ents = append(ents, idxEnt{sum: hex.EncodeToString(hdr[:32]), off: off + recHeader, n: n})
		off += recHeader + n
	}
}

// syncPath fsyncs the file or directory p.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
