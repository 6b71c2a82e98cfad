package files

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tree makes, under a fresh temporary directory, a file "f" holding
// "hello", an empty file "empty", a directory "d" holding "d/x", an empty
// directory "e", a link "ld" to d, a link "lf" to f and a dangling link
// "lx". It returns the directory.
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("hello"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "x"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "e"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "d"), filepath.Join(dir, "ld")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "f"), filepath.Join(dir, "lf")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "lx")))
	for name, mode := range map[string]os.FileMode{"f": 0o644, "empty": 0o644, "d": 0o755} {
		require.NoError(t, os.Chmod(filepath.Join(dir, name), mode)) // whatever the umask
	}
	return dir
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestWrite(t *testing.T) {
	dir := tree(t)
	tests := []struct {
		name    string
		path    string
		data    string
		wantErr string // "" for success; otherwise the whole error text
	}{
		{"new file", "new", "abc", ""},
		{"truncates", "f", "hi", ""},
		{"empty", "f2", "", ""},
		{"missing parent", "no/such", "x", "open " + filepath.Join(dir, "no/such") + ": no such file or directory"},
		{"a directory", "d", "x", "open " + filepath.Join(dir, "d") + ": is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.path)
			err := Write(t.Context(), p, []byte(tt.data), nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, tt.data, string(got))
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.Zero(t, fi.Mode().Perm()&^0o644, "mode %v is wider than 0644", fi.Mode())
		})
	}
}

func TestRead(t *testing.T) {
	dir := tree(t)
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr string
	}{
		{"file", "f", "hello", ""},
		{"empty file", "empty", "", ""},
		{"through a link", "lf", "hello", ""},
		{"missing", "nope", "", "open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"dangling link", "lx", "", "open " + filepath.Join(dir, "lx") + ": no such file or directory"},
		{"a directory", "d", "", "read " + filepath.Join(dir, "d") + ": is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(t.Context(), filepath.Join(dir, tt.path))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestReadTooLarge(t *testing.T) {
	dir := t.TempDir()
	sparse := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Close())
		return p
	}

	t.Run("over MaxRead", func(t *testing.T) {
		p := sparse("over", MaxRead+1)
		_, err := Read(t.Context(), p)
		require.ErrorIs(t, err, ErrTooLarge)
		assert.Equal(t, "read "+p+": file too large (the limit is 67108864 bytes)", err.Error())
	})
	t.Run("at the limit", func(t *testing.T) {
		got, err := readAtMost(t.Context(), sparse("limit", 1000), 1000)
		require.NoError(t, err)
		assert.Len(t, got, 1000)
	})
	t.Run("one over the limit", func(t *testing.T) {
		_, err := readAtMost(t.Context(), sparse("limit+1", 1001), 1000)
		assert.ErrorIs(t, err, ErrTooLarge)
	})
	// A file of /proc reports size 0 and still has content, as a file
	// that grows while it is read has more than its size said: only
	// counting the bytes read stops it. (/dev/zero, an endless one, is
	// now refused as a device before a byte is read: see
	// TestReadRefusesWithoutReading.)
	t.Run("more than its size says", func(t *testing.T) {
		fi, err := os.Stat("/proc/self/maps")
		if err != nil || fi.Size() != 0 {
			t.Skip("no /proc/self/maps of size 0")
		}
		_, err = readAtMost(t.Context(), "/proc/self/maps", 100)
		assert.ErrorIs(t, err, ErrTooLarge)
		got, err := Read(t.Context(), "/proc/self/maps")
		require.NoError(t, err)
		assert.Greater(t, len(got), 100)
	})
}

func TestDelete(t *testing.T) {
	dir := tree(t)
	tests := []struct {
		name    string
		path    string
		wantErr error // compared with errors.Is
		gone    []string
		kept    []string
	}{
		{"file", "f", nil, []string{"f"}, nil},
		{"link to a directory", "ld", nil, []string{"ld"}, []string{"d/x"}},
		{"dangling link", "lx", nil, []string{"lx"}, nil},
		{"empty directory", "e", syscall.EISDIR, nil, []string{"e"}},
		{"directory", "d", syscall.EISDIR, nil, []string{"d/x"}},
		{"missing", "nope", syscall.ENOENT, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.path)
			err := Delete(p, nil)
			if tt.wantErr != nil {
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, &fs.PathError{Op: "remove", Path: p, Err: tt.wantErr}, pe)
			} else {
				require.NoError(t, err)
			}
			for _, g := range tt.gone {
				assert.False(t, exists(filepath.Join(dir, g)), g)
			}
			for _, k := range tt.kept {
				assert.True(t, exists(filepath.Join(dir, k)), k)
			}
		})
	}
	assert.Equal(t, "remove /x/dir: is a directory",
		(&fs.PathError{Op: "remove", Path: "/x/dir", Err: syscall.EISDIR}).Error())
}

func TestMakeDir(t *testing.T) {
	dir := tree(t)
	tests := []struct {
		name    string
		path    string
		wantErr string
	}{
		{"nested", "a/b/c", ""},
		{"existing directory", "d", ""},
		{"through a link", "ld/y", ""},
		{"existing file", "f", "mkdir " + filepath.Join(dir, "f") + ": not a directory"},
		{"file as parent", "f/sub", "mkdir " + filepath.Join(dir, "f") + ": not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.path)
			err := MakeDir(p, nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
		})
	}
}

func TestDeleteDir(t *testing.T) {
	dir := tree(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "deep/a/b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deep/a/b/z"), nil, 0o644))
	tests := []struct {
		name    string
		path    string
		wantErr string
		gone    []string
		kept    []string
	}{
		{"tree", "deep", "", []string{"deep"}, nil},
		{"empty", "e", "", []string{"e"}, nil},
		{"missing", "nope", "", nil, nil},
		{"link to a directory removes only the link", "ld", "", []string{"ld"}, []string{"d/x"}},
		{"file", "f", "remove " + filepath.Join(dir, "f") + ": not a directory", nil, []string{"f"}},
		{"link to a file", "lf", "remove " + filepath.Join(dir, "lf") + ": not a directory", nil, []string{"lf", "f"}},
		{"file as parent", "f/sub", "remove " + filepath.Join(dir, "f/sub") + ": not a directory", nil, []string{"f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DeleteDir(t.Context(), filepath.Join(dir, tt.path), nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				assert.ErrorIs(t, err, syscall.ENOTDIR)
			} else {
				require.NoError(t, err)
			}
			for _, g := range tt.gone {
				assert.False(t, exists(filepath.Join(dir, g)), g)
			}
			for _, k := range tt.kept {
				assert.True(t, exists(filepath.Join(dir, k)), k)
			}
		})
	}
}

func TestList(t *testing.T) {
	dir := tree(t)
	start := time.Now()

	entries, err := List(t.Context(), dir, nil)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	byName := map[string]Entry{}
	for _, e := range entries {
		names = append(names, e.Name)
		byName[e.Name] = e
	}
	assert.Equal(t, []string{"d", "e", "empty", "f", "ld", "lf", "lx"}, names)

	assert.Equal(t, int64(5), byName["f"].Size)
	assert.False(t, byName["f"].IsDir)
	assert.Equal(t, "-rw-r--r--", byName["f"].Mode.String())
	assert.WithinDuration(t, start, byName["f"].ModTime, time.Minute)
	assert.True(t, byName["d"].IsDir)
	assert.True(t, byName["d"].Mode.IsDir())
	assert.True(t, byName["ld"].IsDir, "a link to a directory lists as a directory")
	assert.Equal(t, int64(5), byName["lf"].Size, "a link lists as its target")
	assert.NotZero(t, byName["lx"].Mode&fs.ModeSymlink, "a dangling link lists as itself")

	t.Run("empty directory", func(t *testing.T) {
		entries, err := List(t.Context(), filepath.Join(dir, "e"), nil)
		require.NoError(t, err)
		assert.NotNil(t, entries)
		assert.Empty(t, entries)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := List(t.Context(), filepath.Join(dir, "nope"), nil)
		require.Error(t, err)
		assert.Equal(t, "open "+filepath.Join(dir, "nope")+": no such file or directory", err.Error())
	})
	t.Run("a file", func(t *testing.T) {
		_, err := List(t.Context(), filepath.Join(dir, "f"), nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not a directory")
	})
}

func TestStat(t *testing.T) {
	dir := tree(t)
	tests := []struct {
		name    string
		path    string
		want    Entry // ModTime is not compared
		wantErr error
	}{
		{"file", "f", Entry{Name: "f", Size: 5, Mode: 0o644}, nil},
		{"empty file", "empty", Entry{Name: "empty", Mode: 0o644}, nil},
		{"link to a file", "lf", Entry{Name: "lf", Size: 5, Mode: 0o644}, nil},
		{"missing", "nope", Entry{}, fs.ErrNotExist},
		{"dangling link", "lx", Entry{}, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Stat(filepath.Join(dir, tt.path), nil)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, "stat "+filepath.Join(dir, tt.path)+": no such file or directory", err.Error())
				return
			}
			require.NoError(t, err)
			assert.False(t, got.ModTime.IsZero())
			got.ModTime = time.Time{}
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("directory and link to one", func(t *testing.T) {
		for _, name := range []string{"d", "ld"} {
			got, err := Stat(filepath.Join(dir, name)+"/", nil)
			require.NoError(t, err)
			assert.Equal(t, name, got.Name)
			assert.True(t, got.IsDir, name)
			assert.Equal(t, "drwxr-xr-x", got.Mode.String())
		}
	})
}

// A named pipe without a writer would block open(2) for as long as the
// request lasts; Read refuses it at once instead.
func TestReadNamedPipeDoesNotBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := Read(t.Context(), path)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotRegular)
		assert.Contains(t, err.Error(), path)
	case <-time.After(5 * time.Second):
		// Unblock the reader so the leak check does not fail as well.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		t.Fatal("Read blocked on a named pipe")
	}
}
