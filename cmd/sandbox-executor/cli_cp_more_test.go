package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An uploaded file keeps its permissions, less group and other write, as a
// downloaded one does: an executable stays one.
func TestCLICpKeepsMode(t *testing.T) {
	a := startCLIAgent(t)
	local, remote := t.TempDir(), t.TempDir()
	for _, tt := range []struct{ local, want os.FileMode }{
		{0o755, 0o755},
		{0o700, 0o700},
		{0o775, 0o755},
		{0o640, 0o640},
	} {
		src := filepath.Join(local, "f-"+tt.local.String())
		require.NoError(t, os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o600))
		require.NoError(t, os.Chmod(src, tt.local))
		dst := filepath.Join(remote, filepath.Base(src))
		r := runCLI(t, a.env, nil, "cp", src, "sandbox:"+dst)
		require.Equal(t, cliResult{0, "", ""}, r)
		st, err := os.Stat(dst)
		require.NoError(t, err)
		assert.Equal(t, tt.want, st.Mode().Perm(), "a new file from %v", tt.local)
	}
	// Over an existing file too.
	src, dst := filepath.Join(local, "tool"), filepath.Join(remote, "tool")
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
	require.NoError(t, os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Chmod(src, 0o755))
	r := runCLI(t, a.env, nil, "cp", src, "sandbox:"+dst)
	require.Equal(t, cliResult{0, "", ""}, r)
	st, err := os.Stat(dst)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "a replaced file")
}

// On a terminal, cp draws a progress line for a transfer over a few MiB,
// each way, and leaves it complete; with stderr elsewhere, it draws
// nothing.
func TestCLICpProgress(t *testing.T) {
	a := startCLIAgent(t)
	local, remote := t.TempDir(), t.TempDir()
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	src := filepath.Join(local, "big.bin")
	require.NoError(t, os.WriteFile(src, data, 0o644))
	small := filepath.Join(local, "small.bin")
	require.NoError(t, os.WriteFile(small, data[:1<<20], 0o644))

	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	var screen bytes.Buffer
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // ends when the pty is closed, below
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return screen.String()
	}
	defer func() {
		tty.Close()
		ptmx.Close()
		wg.Wait()
	}()

	code := runCLIWith(t, a.env, nil, io.Discard, tty, "cp", src, "sandbox:"+filepath.Join(remote, "big.bin"))
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return strings.Contains(seen(), "\n") }, 5*time.Second, 5*time.Millisecond,
		"no progress line: %q", seen())
	up := seen()
	assert.Contains(t, up, "\r8.0 MiB / 8.0 MiB 100%", "the bytes of the whole, at the end")
	assert.Regexp(t, `[0-9.]+ [KMG]?i?B/s  in [0-9.]+s`, up, "the rate and the time taken")

	code = runCLIWith(t, a.env, nil, io.Discard, tty, "cp", "sandbox:"+filepath.Join(remote, "big.bin"), filepath.Join(local, "back.bin"))
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return strings.Count(seen(), "\n") == 2 }, 5*time.Second, 5*time.Millisecond,
		"no progress line for the download: %q", seen())
	got, err := os.ReadFile(filepath.Join(local, "back.bin"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))

	// Under the threshold, nothing; the newline count stays at 2.
	code = runCLIWith(t, a.env, nil, io.Discard, tty, "cp", small, "sandbox:"+filepath.Join(remote, "small.bin"))
	require.Equal(t, 0, code)

	// Not a terminal: a file as stderr gets nothing.
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer f.Close()
	code = runCLIWith(t, a.env, nil, io.Discard, f, "cp", src, "sandbox:"+filepath.Join(remote, "again.bin"))
	require.Equal(t, 0, code)
	code = runCLIWith(t, a.env, nil, io.Discard, f, "cp", "sandbox:"+filepath.Join(remote, "again.bin"), filepath.Join(local, "again.bin"))
	require.Equal(t, 0, code)
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, st.Size(), "stderr is not a terminal")
	assert.Equal(t, 2, strings.Count(seen(), "\n"), "a small transfer draws nothing: %q", seen())
}

// The line says the bytes, the share, the rate and the time left; at the
// end, the time taken.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	p := &progress{w: &out, total: 100 << 20, start: start, now: func() time.Time { return now }}
	now = start.Add(2 * time.Second)
	p.add(10 << 20)
	assert.Equal(t, "\r10.0 MiB / 100.0 MiB  10%  5.0 MiB/s  ETA 18s\x1b[K", out.String())
	out.Reset()
	now = now.Add(100 * time.Millisecond)
	p.add(1 << 20)
	assert.Empty(t, out.String(), "not redrawn before progressEvery")
	now = start.Add(20 * time.Second)
	p.add(89 << 20)
	out.Reset()
	p.finish()
	assert.Equal(t, "\r100.0 MiB / 100.0 MiB 100%  5.0 MiB/s  in 20s\x1b[K\n", out.String())

	out.Reset()
	p = &progress{w: &out, start: start, now: func() time.Time { return now }}
	now = start.Add(90 * time.Second)
	p.add(3 << 20)
	p.finish()
	assert.Empty(t, out.String(), "an unknown size under progressFrom")
	p.add(2 << 20)
	out.Reset()
	p.finish()
	assert.Equal(t, "\r5.0 MiB  56.9 KiB/s  in 1m30s\x1b[K\n", out.String())

	var nilProgress *progress
	nilProgress.add(1)
	nilProgress.finish()
	assert.Equal(t, "12 B", sizeText(12))
	assert.Equal(t, "1h02m", durationText(62*time.Minute))
}
