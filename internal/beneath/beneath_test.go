package beneath

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Both ways (openat2, and the walk where it is missing) open what is
// below the directory, and refuse a link anywhere on the way, the last
// element included, and a way out of it.
func TestOpen(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "b", "f"), []byte("in"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), []byte("out"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "a", "link")))
	require.NoError(t, os.Symlink("b/f", filepath.Join(root, "a", "flink")))
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(dir)

	for name, open := range map[string]func(int, string, int) (int, error){
		"openat2": Open,
		"walk": func(d int, rel string, flags int) (int, error) {
			return walk(d, rel, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		},
	} {
		t.Run(name, func(t *testing.T) {
			read := func(rel string) (string, error) {
				fd, err := open(dir, rel, unix.O_RDONLY)
				if err != nil {
					return "", err
				}
				defer unix.Close(fd)
				b := make([]byte, 16)
				n, err := unix.Read(fd, b)
				return string(b[:max(n, 0)]), err
			}
			got, err := read("a/b/f")
			require.NoError(t, err)
			assert.Equal(t, "in", got)
			got, err = read("./a/./b/f")
			require.NoError(t, err)
			assert.Equal(t, "in", got)

			_, err = read("a/link/f")
			assert.True(t, err == unix.ELOOP || err == unix.ENOTDIR, "a link on the way: %v", err)
			_, err = read("a/flink")
			assert.Equal(t, unix.ELOOP, err, "a link at the end")
			_, err = read("../" + filepath.Base(outside) + "/f")
			assert.Equal(t, unix.EXDEV, err, "out of the directory")

			for _, rel := range []string{"", ".", "a/b/", "a/b/."} {
				fd, err := open(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY)
				require.NoError(t, err, "%q", rel)
				unix.Close(fd)
			}
		})
	}
}

// Chmod sets the mode of what is at the name, and refuses a link there
// or on the way; chmodProc, its way where fchmodat2 is missing, sets the
// mode of the file a handle holds, not of what its name is now: as root,
// and as the file's owner.
func TestChmod(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	require.NoError(t, os.Symlink("f", filepath.Join(root, "link")))
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(dir)
	require.NoError(t, Chmod(dir, "f", 0o640))
	assert.Equal(t, os.FileMode(0o640), mode(t, p))
	assert.Equal(t, unix.ELOOP, Chmod(dir, "link", 0o777))
	assert.Equal(t, os.FileMode(0o640), mode(t, p), "not followed")

	fd, err := Open(dir, "f", unix.O_PATH)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, os.Rename(p, p+".moved"))
	require.NoError(t, os.WriteFile(p, nil, 0o600)) // another file at its name now
	require.NoError(t, chmodProc(fd, 0o751))
	assert.Equal(t, os.FileMode(0o751), mode(t, p+".moved"))
	assert.Equal(t, os.FileMode(0o600), mode(t, p), "the file now at the name is untouched")

	if os.Geteuid() != 0 {
		return
	}
	require.NoError(t, os.Chown(p+".moved", 65534, 65534))
	errc := make(chan error, 1)
	go func() { // a thread of its own, whose file-system user becomes nobody's, and ends with it
		runtime.LockOSThread()
		unix.Setfsuid(65534)
		errc <- chmodProc(fd, 0o640)
	}()
	require.NoError(t, <-errc)
	assert.Equal(t, os.FileMode(0o640), mode(t, p+".moved"))
}

// Chtimes sets the times of what is at the name; a link there gets them
// itself.
func TestChtimes(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
	p := filepath.Join(root, "a", "f")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	require.NoError(t, os.Symlink("f", filepath.Join(root, "a", "link")))
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(dir)
	at := unix.NsecToTimespec(1_000_000_000_000_000_000)
	require.NoError(t, Chtimes(dir, "a/f", at, at))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, int64(1_000_000_000_000_000_000), fi.ModTime().UnixNano())
	old := unix.NsecToTimespec(2_000_000_000_000_000_000)
	require.NoError(t, Chtimes(dir, "a/link", old, old))
	fi, err = os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, int64(1_000_000_000_000_000_000), fi.ModTime().UnixNano(), "not followed")
}

func mode(t *testing.T, p string) os.FileMode {
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// Readlink reads a link's target, of any length up to 64 KiB.
func TestReadlink(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("x/", 1000) + "end" // past the first buffer
	require.NoError(t, os.Symlink("target", filepath.Join(root, "short")))
	require.NoError(t, os.Symlink(long, filepath.Join(root, "long")))
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(dir)
	got, err := Readlink(dir, "short")
	require.NoError(t, err)
	assert.Equal(t, "target", got)
	got, err = Readlink(dir, "long")
	require.NoError(t, err)
	assert.Equal(t, long, got)
	_, err = Readlink(dir, "missing")
	assert.Equal(t, unix.ENOENT, err)
}
