package beneath

import (
	"os"
	"path/filepath"
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
