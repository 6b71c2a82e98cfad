package edit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbox-executor/sandbox-executor/files"
)

// patchRoot is the directory a patch applies in (its cwd), open as an
// os.Root: every file the patch reads, writes, makes or removes is
// reached through it, so that no "..", absolute path or symbolic link,
// planted before the request or during it, leads outside. It is opened,
// and used, on the thread that has the patch's user's identity (see
// ApplyPatch), so the kernel checks that user's rights on the way.
type patchRoot struct {
	dir  string // absolute, as the request named it
	real string // dir with its links resolved, as /proc names what is under it
	r    *os.Root
}

func openPatchRoot(dir string) (*patchRoot, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	p := &patchRoot{dir: dir, r: r}
	f, err := r.Open(".")
	if err == nil {
		p.real, err = fdPath(f)
		f.Close()
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return p, nil
}

func (p *patchRoot) Close() error { return p.r.Close() }

// rel returns abs (under dir, as under checked) relative to dir.
func (p *patchRoot) rel(abs string) string {
	rel, err := filepath.Rel(p.dir, abs)
	if err != nil {
		return abs // under made abs from dir: not reached; the root refuses it anyway
	}
	return rel
}

// errEscapes is the text of os.Root's error for a path that would leave
// it (by "..", or a link); os has no sentinel for it.
const errEscapes = "path escapes from parent"

// outside turns os.Root's refusal of a path that leads outside into
// ErrInvalid (400: the patch names a file it may not touch), naming the
// patch's path; other errors are returned as they are.
func (p *patchRoot) outside(err error, abs string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == errEscapes {
		return fmt.Errorf("%w: %s leads outside %s", ErrInvalid, abs, p.dir)
	}
	return err
}

// fdPath returns the path the kernel has for the file open at f.
func fdPath(f *os.File) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}

// read reads the regular file at rel, following links that stay under
// the root, and returns its content, its stat, and the path of the file
// itself relative to the root (another one when rel is a link): that is
// the file an update replaces. A directory, a named pipe, a socket or a
// device is refused before anything is read; so is a file over
// maxFileBytes.
func (p *patchRoot) read(rel, abs string) (data []byte, fi fs.FileInfo, target string, err error) {
	f, err := p.r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, "", p.outside(err, abs)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, "", err
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, nil, "", &fs.PathError{Op: "edit", Path: abs, Err: fmt.Errorf("%w: %s", files.ErrNotRegular, fi.Mode().Type())}
	}
	if data, err = readWhole(f, fi, abs); err != nil {
		return nil, nil, "", err
	}
	real, err := fdPath(f)
	if err != nil {
		return nil, nil, "", err
	}
	target, err = filepath.Rel(p.real, real)
	if err != nil || target == ".." || strings.HasPrefix(target, "../") {
		return nil, nil, "", fmt.Errorf("%w: %s leads outside %s", ErrInvalid, abs, p.dir)
	}
	return data, fi, target, nil
}

// fileMeta is what a file written through the root gets besides its
// content.
type fileMeta struct {
	mode fs.FileMode
	// chown, if set, gives the file uid and gid: the agent replacing a
	// file as itself keeps its owner (as files.Stage does). A patch
	// applied as a user leaves the file that user's: the thread that
	// creates it has the user's identity.
	chown    bool
	uid, gid int
}

// writeAtomic replaces (or creates) the file at rel with data: a
// temporary file beside it, written, synced and given meta, is renamed
// over it, so that a reader sees the old content or the new one, whole.
// check, if not nil, runs just before the rename and may refuse it; then
// nothing is left behind.
func (p *patchRoot) writeAtomic(rel string, data []byte, meta fileMeta, check func() error) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	dir, base := filepath.Split(rel)
	tmp := filepath.Join(dir, "."+base+".patch-"+hex.EncodeToString(rnd[:]))
	f, err := p.r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = fill(f, data, meta)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		err = p.r.Rename(tmp, rel)
	}
	if err != nil {
		_ = p.r.Remove(tmp)
	}
	return err
}

func fill(f *os.File, data []byte, meta fileMeta) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(meta.mode.Perm()); err != nil {
		return err
	}
	if meta.chown {
		_ = f.Chown(meta.uid, meta.gid) // best effort, as files.Stage keeps an owner
	}
	return f.Sync()
}

// missingDirs returns the directories above rel that do not exist, the
// deepest first.
func (p *patchRoot) missingDirs(rel string) []string {
	var ds []string
	for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := p.r.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		ds = append(ds, d)
	}
	return ds
}
