package files

import (
	"fmt"
	"io/fs"
	"syscall"
)

// ETag is a file's strong ETag, as GET /files sends it: its device,
// inode, size and modification time in nanoseconds, in hex, quoted
// ("fd01-8a3c1-400-1853f0e2a3b4c5d6"). An upload replaces a file with a
// new inode, and an in-place write changes its time, so new content means
// a new ETag; the same file untouched keeps it, across restarts of the
// agent. An edit compares a client's If-Match with it.
func ETag(fi fs.FileInfo) string {
	mtime := fi.ModTime().UnixNano()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf(`"%x-%x-%x-%x"`, st.Dev, st.Ino, fi.Size(), mtime)
	}
	return fmt.Sprintf(`"%x-%x"`, fi.Size(), mtime)
}
