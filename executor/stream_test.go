package executor

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// StartStream's pipes hold as much as a pipe may (one chunk), so that the
// command writes on while one is handed over; Run's keep the system's
// default. Every byte arrives, in chunks of at most streamReadSize.
func TestStartStreamPipes(t *testing.T) {
	var r Runner
	var mu sync.Mutex
	var out, errOut bytes.Buffer
	largest := 0
	p, err := r.StartStream(t.Context(), Command{Cmd: "head -c 4194304 /dev/zero; head -c 300000 /dev/zero >&2; exec sleep 10"}, 0,
		func(s Stream, b []byte) {
			mu.Lock()
			defer mu.Unlock()
			largest = max(largest, len(b))
			if s == Stderr {
				errOut.Write(b)
			} else {
				out.Write(b)
			}
		})
	require.NoError(t, err)
	defer p.Kill()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return out.Len() == 4<<20 && errOut.Len() == 300000
	}, 30*time.Second, 10*time.Millisecond)
	for fd := 1; fd <= 2; fd++ {
		assert.Equal(t, stdinPipeSize, pipeSize(t, p.Pid(), fd), "fd %d", fd)
	}
	mu.Lock()
	assert.LessOrEqual(t, largest, streamReadSize)
	mu.Unlock()
	require.NoError(t, p.Kill())
	p.Wait()

	p, err = r.Start(t.Context(), Command{Cmd: "exec sleep 10"}, func(Stream, time.Time, [][]byte) {})
	require.NoError(t, err)
	defer p.Wait()
	defer p.Kill()
	assert.Equal(t, 64<<10, pipeSize(t, p.Pid(), 1), "Start's pipe keeps the default")
}

// The head bytes StartStream leaves free come before every chunk, are the
// ChunkFunc's to write, and never hold output: every byte of the command's
// arrives once, in order, after them.
func TestStartStreamHead(t *testing.T) {
	var r Runner
	const head = 3
	var mu sync.Mutex
	var out bytes.Buffer
	chunks := 0
	// 3 MiB of bytes 0..250 repeated, so that a byte lost, repeated or
	// moved shows.
	p, err := r.StartStream(t.Context(), Command{Cmd: "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(251)) * 12534)'"}, head,
		func(s Stream, b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if !assert.Greater(t, len(b), head) || !assert.LessOrEqual(t, len(b), head+streamReadSize) {
				return
			}
			copy(b, "HDR") // the ChunkFunc's own header
			out.Write(b[head:])
			chunks++
		})
	require.NoError(t, err)
	res := p.Wait()
	require.Equal(t, 0, res.Code)
	mu.Lock()
	defer mu.Unlock()
	want := bytes.Repeat(func() []byte {
		b := make([]byte, 251)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}(), 12534)
	assert.True(t, bytes.Equal(want, out.Bytes()), "got %d bytes, want %d", out.Len(), len(want))
	assert.Greater(t, chunks, 1)
}

// pipeSize returns the capacity of the pipe that is descriptor fd of pid.
func pipeSize(t *testing.T, pid, fd int) int {
	t.Helper()
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
	require.NoError(t, err)
	return n
}
