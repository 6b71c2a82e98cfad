package files

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openFDs counts the agent's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(des)
}

// bytesRead is the number of bytes the process has read with read(2) and
// the like, from /proc/self/io; -1 if the kernel does not say.
func bytesRead(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	return -1
}

// allReturn runs fn n times at once and fails the test if any call has
// not returned after a generous time: a call blocked in open(2) or
// read(2) never returns. release, if not nil, is called then to let the
// blocked calls go, so that the leak check does not fail as well.
func allReturn(t *testing.T, n int, fn func() error, release func()) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return errs
	case <-time.After(20 * time.Second):
		if release != nil {
			release()
		}
		t.Fatalf("some of %d calls are still blocked", n)
		return nil
	}
}

// specialFiles makes a named pipe and a listening Unix socket in a fresh
// directory and returns their paths.
func specialFiles(t *testing.T) (fifo, sock string) {
	t.Helper()
	dir := t.TempDir()
	fifo, sock = filepath.Join(dir, "fifo"), filepath.Join(dir, "sock")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return fifo, sock
}

// Writing to a named pipe without a reader used to block open(2) for
// good, each call holding an OS thread even after its client had left:
// about 10,000 of them ended the agent with "thread exhaustion". Every
// call now returns at once with a refusal, and leaves no descriptor open.
func TestWriteNamedPipeWithoutReader(t *testing.T) {
	fifo, _ := specialFiles(t)
	before := openFDs(t)
	const calls = 200
	errs := allReturn(t, calls, func() error { return Write(t.Context(), fifo, []byte("x"), nil) }, func() {
		// Readers let the blocked opens complete.
		for range calls {
			if fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				defer syscall.Close(fd)
			}
		}
	})
	for _, err := range errs {
		require.ErrorIs(t, err, ErrNotRegular)
		require.Equal(t, "write "+fifo+": named pipes and sockets cannot be written", err.Error())
	}
	assert.Equal(t, before, openFDs(t), "no descriptor is left open")
}

// With a reader on the pipe, open(2) would succeed: the write is refused
// all the same, and the reader gets nothing.
func TestWriteNamedPipeWithReader(t *testing.T) {
	fifo, _ := specialFiles(t)
	rfd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer syscall.Close(rfd)

	err = Write(t.Context(), fifo, []byte("secret"), nil)
	require.ErrorIs(t, err, ErrNotRegular)
	buf := make([]byte, 16)
	n, err := syscall.Read(rfd, buf)
	if err != syscall.EAGAIN { // EAGAIN: a writer is still connected, with nothing written
		require.NoError(t, err)
	}
	assert.Equal(t, 0, max(n, 0), "the reader got %q", buf[:max(n, 0)])
}

func TestWriteRefusesDevicesAndSockets(t *testing.T) {
	_, sock := specialFiles(t)
	tests := []struct{ path, want string }{
		{"/dev/null", "write /dev/null: devices cannot be written"},
		{"/dev/zero", "write /dev/zero: devices cannot be written"},
		{sock, "write " + sock + ": named pipes and sockets cannot be written"},
	}
	for _, tt := range tests {
		if _, err := os.Stat(tt.path); err != nil {
			t.Logf("skipping %s: %v", tt.path, err)
			continue
		}
		err := Write(t.Context(), tt.path, []byte("x"), nil)
		require.ErrorIs(t, err, ErrNotRegular, tt.path)
		assert.Equal(t, tt.want, err.Error())
	}
	// A link to a device is refused as the device.
	link := filepath.Join(t.TempDir(), "null")
	require.NoError(t, os.Symlink("/dev/null", link))
	assert.ErrorIs(t, Write(t.Context(), link, []byte("x"), nil), ErrNotRegular)
}

// Reading a terminal master (/dev/ptmx) or the kernel log used to block
// for good, holding a descriptor; /dev/zero was read for 64 MiB before it
// was refused. Devices, pipes and sockets are now refused before a byte
// is read, and no descriptor stays open.
func TestReadRefusesWithoutReading(t *testing.T) {
	fifo, sock := specialFiles(t)
	// A second pipe with a writer and data waiting, which a read must
	// leave there.
	full := filepath.Join(t.TempDir(), "full")
	require.NoError(t, syscall.Mkfifo(full, 0o644))
	wfd, err := syscall.Open(full, syscall.O_RDWR|syscall.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer syscall.Close(wfd)
	_, err = syscall.Write(wfd, []byte("data"))
	require.NoError(t, err)

	tests := []struct{ path, want string }{
		{"/dev/zero", "read /dev/zero: devices cannot be read"},
		{"/dev/ptmx", "read /dev/ptmx: devices cannot be read"},
		{"/dev/kmsg", "read /dev/kmsg: devices cannot be read"},
		{"/dev/null", "read /dev/null: devices cannot be read"},
		{fifo, "read " + fifo + ": named pipes and sockets cannot be read"},
		{full, "read " + full + ": named pipes and sockets cannot be read"},
		{sock, "read " + sock + ": named pipes and sockets cannot be read"},
	}
	var paths []string
	for _, tt := range tests {
		if _, err := os.Stat(tt.path); err == nil {
			paths = append(paths, tt.path)
		}
	}
	fds, read := openFDs(t), bytesRead(t)
	const rounds = 10
	errs := allReturn(t, rounds*len(paths), func() func() error {
		var mu sync.Mutex
		next := 0
		return func() error {
			mu.Lock()
			p := paths[next%len(paths)]
			next++
			mu.Unlock()
			_, err := Read(t.Context(), p)
			return err
		}
	}(), nil)
	if read >= 0 {
		assert.Less(t, bytesRead(t)-read, int64(1<<20), "devices were read before being refused")
	}
	assert.Equal(t, fds, openFDs(t), "no descriptor is left open")
	for _, err := range errs {
		require.ErrorIs(t, err, ErrNotRegular)
	}
	for _, tt := range tests {
		if _, err := os.Stat(tt.path); err != nil {
			continue
		}
		_, err := Read(t.Context(), tt.path)
		assert.Equal(t, tt.want, err.Error())
	}
	buf := make([]byte, 16)
	n, err := syscall.Read(wfd, buf)
	require.NoError(t, err)
	assert.Equal(t, "data", string(buf[:n]), "the pipe's data is still there")
}

// list_dir of a named pipe must not block in open(2) as a write did
// (os.ReadDir's O_DIRECTORY already kept it from blocking; List keeps it).
func TestListNamedPipe(t *testing.T) {
	fifo, _ := specialFiles(t)
	errs := allReturn(t, 1, func() error { _, err := List(t.Context(), fifo, nil); return err }, func() {
		if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
	require.Error(t, errs[0])
	assert.Equal(t, "open "+fifo+": not a directory", errs[0].Error())
}

func TestStopsWhenContextDone(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, make([]byte, 3*chunk), 0o644))
	tree := filepath.Join(dir, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o755))
	for i := range 10 {
		require.NoError(t, os.WriteFile(filepath.Join(tree, "sub", strconv.Itoa(i)), nil, 0o644))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := Scan(ctx, big, nil)
	assert.ErrorIs(t, err, context.Canceled, "Scan")
	c, err := Scan(t.Context(), big, nil)
	require.NoError(t, err)
	defer c.Close()
	assert.ErrorIs(t, c.Copy(ctx, &strings.Builder{}), context.Canceled, "Copy")
	assert.ErrorIs(t, Write(ctx, filepath.Join(dir, "w"), []byte("x"), nil), context.Canceled, "Write")
	_, err = List(ctx, tree, nil)
	assert.ErrorIs(t, err, context.Canceled, "List")
	assert.ErrorIs(t, DeleteDir(ctx, tree, nil), context.Canceled, "DeleteDir")
	assert.FileExists(t, filepath.Join(tree, "sub", "0"))
}
