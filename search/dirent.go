package search

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The walk reads directories with getdents64 itself, rather than through
// os.ReadDir, for what find_files needs to be as fast as find: the type
// of each entry comes from the directory (d_type), so only what a
// request returns is ever stat'ed, and it is stat'ed relative to the
// directory's open descriptor (fstatat), not by a path resolved again
// from the root; the names of one getdents call share one allocation.

// dirEnt is one name of a directory listing and its type as the
// directory entry gives it: unix.DT_DIR, DT_REG, DT_LNK, another DT_
// for a special file, or DT_UNKNOWN where the file system does not say.
type dirEnt struct {
	name string
	typ  uint8
}

// direntBufSize is the buffer of one getdents64 call: large directories
// take fewer calls with it, and a walk holds one.
const direntBufSize = 32 << 10

// maxEINTR is how many interrupted getdents64 calls one listing retries
// (a FUSE file system may be interrupted); then it is an error.
const maxEINTR = 100

// Offsets in a struct linux_dirent64: d_ino (8 bytes), d_off (8),
// d_reclen (2), d_type (1), then d_name, NUL-terminated.
const (
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// readDir lists the directory open at fd, without "." and "..", sorted
// by the bytes of the names (as os.ReadDir). buf is scratch for the
// calls. On an error it returns the names it read before it, sorted.
func readDir(fd int, buf []byte) ([]dirEnt, error) {
	var ents []dirEnt
	var err error
	for eintr := 0; ; {
		var n int
		n, err = unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) && eintr < maxEINTR {
			eintr++
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		ents = parseDirents(ents, buf[:n])
	}
	slices.SortFunc(ents, func(a, b dirEnt) int { return strings.Compare(a.name, b.name) })
	return ents, err
}

// parseDirents appends the entries of one getdents64 result to ents. The
// names are substrings of one string made of b, so a directory of n
// names costs one allocation per call rather than n.
func parseDirents(ents []dirEnt, b []byte) []dirEnt {
	s := string(b)
	for off := 0; off+direntName <= len(b); {
		reclen := int(binary.NativeEndian.Uint16(b[off+direntReclen:]))
		if reclen <= direntName || off+reclen > len(b) {
			break // not a record the kernel writes
		}
		name := b[off+direntName : off+reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		typ := b[off+direntType]
		start := off + direntName
		off += reclen
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		ents = append(ents, dirEnt{name: s[start : start+len(name)], typ: typ})
	}
	return ents
}

// typeOf returns the DT_ type of the file at name in the directory open
// at dirfd (or at abs, with dirfd -1), by lstat: for a file system whose
// directory entries do not say (DT_UNKNOWN).
func typeOf(dirfd int, name, abs string) (uint8, error) {
	var st unix.Stat_t
	if err := lstatAt(dirfd, name, abs, &st); err != nil {
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR, nil
	case unix.S_IFREG:
		return unix.DT_REG, nil
	case unix.S_IFLNK:
		return unix.DT_LNK, nil
	}
	return unix.DT_FIFO, nil // any special file: the walk treats them alike
}

// lstatAt lstat's the file at name in the directory open at dirfd, or,
// with dirfd -1, the file at abs.
func lstatAt(dirfd int, name, abs string, st *unix.Stat_t) error {
	if dirfd < 0 {
		return unix.Lstat(abs, st)
	}
	return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// openDir opens the directory at name in the directory open at dirfd
// (or at abs, with dirfd -1), never through a symbolic link: an entry
// that was a directory when listed and is a link now is not followed.
func openDir(dirfd int, name, abs string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if dirfd < 0 {
		return unix.Open(abs, flags, 0)
	}
	return unix.Openat(dirfd, name, flags, 0)
}
