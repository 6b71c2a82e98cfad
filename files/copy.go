package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/sandbox-executor/sandbox-executor/internal/beneath"
	"golang.org/x/sys/unix"
)

// A copy reads its source and writes its copy through directory file
// descriptors, never by path: the agent may copy as root in directories
// another user can write, and that user could otherwise swap a directory
// on the way for a link, to have root read a directory of root's into
// the copy, or write the copy into a directory of root's (as with
// extraction; see extract_at.go). Each element is opened with
// O_NOFOLLOW relative to its parent, and the copy is made in a temporary
// directory held open from its making to its rename.

// maxCopyDepth bounds the directories a copy descends into.
const maxCopyDepth = 256

// copyBatch is how many names a copy reads from a directory at a time.
const copyBatch = 256

// copyInto copies from into a temporary directory made beside to, then
// renames the copy into place; the temporary directory goes either way.
// With keepOwners, each copy is given its source's owner where the
// copier may (see treeCopy). uid is the copier's.
func (p *pair) copyInto(ctx context.Context, overwrite, keepOwners bool, uid int) error {
	toDir := int(p.toDir.Fd())
	if !overwrite {
		if _, err := lstatAt(toDir, p.toName); err == nil {
			return &fs.PathError{Op: p.op, Path: p.to, Err: syscall.EEXIST}
		}
	}
	tmp, err := makeCopyDir(toDir, uid)
	if err != nil {
		return err
	}
	defer tmp.remove() // empty once its copy is renamed out
	c := treeCopy{ctx: ctx, keepOwners: keepOwners}
	if err := c.copyAt(int(p.fromDir.Fd()), p.fromName, tmp.fd, "c", p.fromPath(), 0); err != nil {
		return err
	}
	return p.renameFrom(tmp.fd, "c", overwrite)
}

// makeCopyDir makes a directory of a new random name in dir, uid's and
// readable by it alone, and opens it (see openTemp).
func makeCopyDir(dir int, uid int) (*temp, error) {
	for range 16 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := ".sandbox-copy-" + hex.EncodeToString(b[:])
		err := ignoringEINTR(func() error { return unix.Mkdirat(dir, name, 0o700) })
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "mkdir", Path: name, Err: err}
		}
		return openTemp(dir, name, uid)
	}
	return nil, &fs.PathError{Op: "mkdir", Path: ".sandbox-copy-*", Err: unix.EEXIST}
}

// treeCopy is one copy's settings.
type treeCopy struct {
	ctx context.Context
	// keepOwners gives each copy its source's owner, as mv(1) does across
	// file systems; where the copier may not (it is not root), the copy
	// stays the copier's. Without it a copy is its maker's, as cp(1)
	// makes it.
	keepOwners bool
}

// copyAt copies name, in the directory srcDir, to dstName, which does not
// exist yet, in dstDir: a link as a link, a directory with everything in
// it, a regular file with its content; each with its mode, except that a
// file whose copy has another owner or group than it loses its setuid or
// setgid bit, as cp(1) drops them: root's copy of a user's setuid program
// would otherwise run as root. path names the source in errors.
func (c treeCopy) copyAt(srcDir int, name string, dstDir int, dstName, path string, depth int) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	st, err := lstatAt(srcDir, name)
	if err != nil {
		return &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	switch {
	case isLink(st):
		target, err := beneath.Readlink(srcDir, name)
		if err != nil {
			return &fs.PathError{Op: "readlink", Path: path, Err: err}
		}
		if err := ignoringEINTR(func() error { return unix.Symlinkat(target, dstDir, dstName) }); err != nil {
			return &fs.PathError{Op: "symlink", Path: path, Err: err}
		}
		if c.keepOwners {
			_ = ignoringEINTR(func() error {
				return unix.Fchownat(dstDir, dstName, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
			})
		}
		return nil
	case isDir(st):
		return c.copyDirAt(srcDir, name, dstDir, dstName, path, depth)
	case isReg(st):
		return c.copyFileAt(srcDir, name, dstDir, dstName, path)
	}
	return notRegularError(fmt.Sprintf("copy %s: named pipes, sockets and devices are not copied", path))
}

// copyDirAt copies the directory name of srcDir, as copyAt does.
func (c treeCopy) copyDirAt(srcDir int, name string, dstDir int, dstName, path string, depth int) error {
	if depth >= maxCopyDepth {
		return &fs.PathError{Op: "copy", Path: path, Err: syscall.ELOOP}
	}
	fd, err := openDirAt(srcDir, name) // a link swapped in since the lstat is refused
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	src := os.NewFile(uintptr(fd), path)
	defer src.Close()
	st, err := fstat(fd)
	if err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := ignoringEINTR(func() error { return unix.Mkdirat(dstDir, dstName, 0o700) }); err != nil {
		return &fs.PathError{Op: "mkdir", Path: path, Err: err}
	}
	dfd, err := ignoringEINTRFD(func() (int, error) { return unix.Openat(dstDir, dstName, dirFlags, 0) })
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	dst := os.NewFile(uintptr(dfd), dstName)
	defer dst.Close()
	for {
		names, err := src.Readdirnames(copyBatch)
		for _, n := range names {
			if err := c.copyAt(fd, n, dfd, n, path+"/"+n, depth+1); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &fs.PathError{Op: "readdirent", Path: path, Err: err}
		}
	}
	if err := ignoringEINTR(func() error { return unix.Fchmod(dfd, c.mode(dfd, st)) }); err != nil {
		return &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}

// mode gives the copy open as fd its source's owner if c keeps owners,
// and returns the mode to set on it: st's, without the setuid and setgid
// bits of a regular file whose copy has another owner or group.
func (c treeCopy) mode(fd int, st unix.Stat_t) uint32 {
	if c.keepOwners {
		_ = ignoringEINTR(func() error { return unix.Fchown(fd, int(st.Uid), int(st.Gid)) }) // not root: the copier's
	}
	mode := st.Mode & 0o7777 // permissions, setuid, setgid, sticky
	if !isReg(st) {
		return mode // a directory's setgid and sticky bits grant no rights
	}
	now, err := fstat(fd)
	if err != nil || now.Uid != st.Uid {
		mode &^= unix.S_ISUID
	}
	if err != nil || now.Gid != st.Gid {
		mode &^= unix.S_ISGID
	}
	return mode
}

// copyFileAt copies the regular file name of srcDir, as copyAt does.
func (c treeCopy) copyFileAt(srcDir int, name string, dstDir int, dstName, path string) error {
	// O_NONBLOCK: a named pipe swapped in since the lstat must not hold
	// the open; it is then refused as not regular.
	fd, err := ignoringEINTRFD(func() (int, error) {
		return unix.Openat(srcDir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	in := os.NewFile(uintptr(fd), path)
	defer in.Close()
	st, err := fstat(fd)
	if err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if !isReg(st) {
		return notRegularError(fmt.Sprintf("copy %s: named pipes, sockets and devices are not copied", path))
	}
	ofd, err := ignoringEINTRFD(func() (int, error) {
		return unix.Openat(dstDir, dstName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	out := os.NewFile(uintptr(ofd), dstName)
	_, err = io.Copy(out, in) // copy_file_range where the kernel can
	if err == nil {
		// c.mode chowns first, if it does, which clears setuid.
		err = ignoringEINTR(func() error { return unix.Fchmod(ofd, c.mode(ofd, st)) })
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
