package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// Figure 11: the streaming file endpoint /files, through the project's
// client, against the same bytes moved by the plainest means.
const (
	filesBig       = 1 << 30 // the file uploaded, downloaded and read in ranges
	filesRSSGrowth = 16      // MiB the agent's RSS may grow by during a transfer
	filesTreeFiles = 10_000  // files of the tree archived
	filesTreeSize  = 1 << 10 // bytes each
	filesRanges    = 1_000   // random ranges read
	filesRangeSize = 4 << 10
	filesHealths   = 300 // /health round trips for the reference
	filesTimeout   = 55 * time.Second
)

// sectionFiles measures figure 13 on a fresh agent, in a temporary
// directory of the disk that holds the system's temporary files (the
// agent and every reference write to the same one):
//   - a 1 GiB upload (PUT, written aside, fsynced, renamed) against the
//     same bytes sent over a plain loopback TCP connection into a file
//     there, fsynced; and a 1 GiB download (GET, sendfile) into a file
//     against the same bytes read from the file and sent over a plain
//     connection into another file; each ≥ 0.7×, with the agent's RSS
//     growing by at most 16 MiB during either;
//   - a tar.gz download of 10,000 files of 1 KiB against
//     tar -czf - DIR > /dev/null: ≥ 0.5×;
//   - 1,000 random 4 KiB ranges of the 1 GiB file: median latency against
//     one /health round trip, reported.
//
// It is long because its figures share one agent and one big file, set
// up and removed in order here.
func (b *bench) sectionFiles(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, filesTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandbox-bench-files-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "src.bin")
	if err := writeBigFile(src, filesBig); err != nil {
		return err
	}
	a, err := startAgent(ctx, b.bin)
	if err != nil {
		return err
	}
	defer a.stop()
	c := a.c
	if err := b.filesUpload(ctx, a, c, dir, src); err != nil {
		return err
	}
	if err := b.filesDownload(ctx, a, c, dir, src); err != nil {
		return err
	}
	if err := b.filesRanges(ctx, c, src); err != nil {
		return err
	}
	if err := os.Remove(src); err != nil {
		return err
	}
	return b.filesArchive(ctx, c, dir)
}

// writeBigFile writes size bytes to path: a random MiB over and over, so
// that nothing on the way can compress it.
func writeBigFile(path string, size int64) error {
	block := make([]byte, 1<<20)
	_, _ = crand.Read(block)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for n := int64(0); n < size; n += int64(len(block)) {
		if _, err := f.Write(block); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// abba runs ref and run (the agent's part) in the order ref, run, run,
// ref and returns the best time of each, and the largest RSS growth of
// the agent a during run (not sampled if a is nil): the machine's drift
// over the four runs (the disk writing back what came before, other
// helpers' work) hits both alike.
func abba(a *agent, ref, run func() error) (refBest, agentBest time.Duration, rise float64, err error) {
	for _, agentsTurn := range []bool{false, true, true, false} {
		if !agentsTurn {
			start := time.Now()
			if err := ref(); err != nil {
				return 0, 0, 0, fmt.Errorf("reference: %w", err)
			}
			if d := time.Since(start); refBest == 0 || d < refBest {
				refBest = d
			}
			continue
		}
		d, r, err := growth(a, run)
		if err != nil {
			return 0, 0, 0, err
		}
		if a == nil {
			r = 0
		}
		if agentBest == 0 || d < agentBest {
			agentBest = d
		}
		rise = max(rise, r)
	}
	return refBest, agentBest, rise, nil
}

// growth samples the agent's RSS while fn runs and returns fn's duration
// and how far the RSS rose above where it was before.
func growth(a *agent, fn func() error) (time.Duration, float64, error) {
	if a == nil {
		start := time.Now()
		err := fn()
		return time.Since(start), 0, err
	}
	before := a.rssMiB()
	watch := startRSSWatch(a, safetyCap())
	start := time.Now()
	err := fn()
	took := time.Since(start)
	peak, killed := watch.stop()
	if killed {
		return took, peak - before, errors.New("the agent passed the safety cap and was killed")
	}
	return took, max(peak-before, 0), err
}

func gibPerSec(d time.Duration) float64 { return float64(filesBig) / (1 << 30) / d.Seconds() }

// filesUpload measures the upload and its reference, each into its own
// file of dir, removed after each run.
func (b *bench) filesUpload(ctx context.Context, a *agent, c *client.Client, dir, src string) error {
	dst := filepath.Join(dir, "up.bin")
	ref, took, rise, err := abba(a, func() error {
		defer os.Remove(dst)
		return plainTransfer(ctx, src, dst, true)
	}, func() error {
		defer os.Remove(dst)
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		res, err := c.Upload(ctx, dst, f, nil)
		if err == nil && res.Size != filesBig {
			err = fmt.Errorf("the agent wrote %d bytes", res.Size)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	b.rep.add(newFigure("13 files", "PUT /files 1 GiB (fsynced, renamed)", gibPerSec(took), "GiB/s").
		withRef(gibPerSec(ref), "plain loopback TCP into a file of the same directory, fsynced").ratioAtLeast(0.7).
		withNote("best of 2 each, in the order ref, agent, agent, ref: %.2f s vs %.2f s", took.Seconds(), ref.Seconds()))
	b.rep.add(newFigure("13 files", "agent RSS growth during the upload", rise, "MiB").
		withTarget(fmt.Sprintf("≤ %d MiB", filesRSSGrowth), rise <= filesRSSGrowth))
	return nil
}

// filesDownload measures the download into a file and its reference.
func (b *bench) filesDownload(ctx context.Context, a *agent, c *client.Client, dir, src string) error {
	dst := filepath.Join(dir, "down.bin")
	ref, took, rise, err := abba(a, func() error {
		defer os.Remove(dst)
		return plainTransfer(ctx, src, dst, false)
	}, func() error {
		defer os.Remove(dst)
		f, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer f.Close()
		d, err := c.Download(ctx, src, f, nil)
		if err == nil && d.Written != filesBig {
			err = fmt.Errorf("got %d bytes", d.Written)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	b.rep.add(newFigure("13 files", "GET /files 1 GiB into a file", gibPerSec(took), "GiB/s").
		withRef(gibPerSec(ref), "the file over plain loopback TCP into a file of the same directory").ratioAtLeast(0.7).
		withNote("best of 2 each, in the order ref, agent, agent, ref: %.2f s vs %.2f s; the agent sends with sendfile(2)",
			took.Seconds(), ref.Seconds()))
	b.rep.add(newFigure("13 files", "agent RSS growth during the download", rise, "MiB").
		withTarget(fmt.Sprintf("≤ %d MiB", filesRSSGrowth), rise <= filesRSSGrowth))
	return nil
}

// plainTransfer sends the file src over a loopback TCP connection to a
// receiver that writes it to dst (and fsyncs it if sync, as the agent
// does with an upload), and returns once the receiver is done.
func plainTransfer(ctx context.Context, src, dst string, sync bool) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	done := make(chan error, 1)
	go receiveInto(done, ln, dst, sync)
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close() // the receiver's Accept fails
		<-done
		return err
	}
	f, err := os.Open(src)
	if err == nil {
		_, err = io.Copy(conn, f) // sendfile(2)
		f.Close()
	}
	conn.Close()
	if rerr := <-done; err == nil {
		err = rerr
	}
	return err
}

// receiveInto accepts one connection on ln and copies it into a new file
// dst, synced if sync.
//
// receiveInto runs in its own goroutine, started by plainTransfer, which
// waits for it; it ends when the sender closes its connection.
func receiveInto(done chan<- error, ln net.Listener, dst string, sync bool) {
	conn, err := ln.Accept()
	if err != nil {
		done <- err
		return
	}
	defer conn.Close()
	f, err := os.Create(dst)
	if err != nil {
		done <- err
		return
	}
	// A read and write loop with the agent's buffer size: os.File's
	// ReadFrom would splice(2) from the socket, which no HTTP server can
	// do with a request body (its framing is in the way); the reference
	// is the cost of the bytes themselves, not of a path the agent lacks.
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, struct{ io.Reader }{conn}, make([]byte, 256<<10))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	done <- err
}

// filesRanges measures random 4 KiB ranges of the big file, one at a
// time, against /health round trips on the same client.
func (b *bench) filesRanges(ctx context.Context, c *client.Client, src string) error {
	health := make([]time.Duration, 0, filesHealths)
	for range filesHealths {
		t0 := time.Now()
		if _, err := c.Health(ctx); err != nil {
			return err
		}
		health = append(health, time.Since(t0))
	}
	buf := make([]byte, 0, filesRangeSize)
	lat := make([]time.Duration, 0, filesRanges)
	for range filesRanges {
		off := rand.Int64N(filesBig - filesRangeSize)
		w := &sliceWriter{b: buf[:0]}
		t0 := time.Now()
		d, err := c.Download(ctx, src, w, &client.DownloadOptions{Offset: off, Length: filesRangeSize})
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		if d.Written != filesRangeSize || d.Offset != off {
			return fmt.Errorf("range at %d: %d bytes from %d", off, d.Written, d.Offset)
		}
	}
	b.rep.add(newFigure("13 files", "1,000 random 4 KiB ranges of 1 GiB, median", us(median(lat)), "µs").
		withRef(us(median(health)), "one GET /health round trip, median").
		withNote("p99 %.0f µs; each a GET with Range on a kept-alive connection", us(percentile(lat, 99))))
	return nil
}

// sliceWriter appends to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// filesArchive measures a tar.gz download of a tree of small files
// against GNU tar with gzip on the same tree.
func (b *bench) filesArchive(ctx context.Context, c *client.Client, dir string) error {
	tree := filepath.Join(dir, "tree")
	if err := writeTree(tree); err != nil {
		return err
	}
	var size int64
	ref, agentTime, _, err := abba(nil, func() error {
		cmd := exec.CommandContext(ctx, "sh", "-c", `tar -czf - -C "$1" . > /dev/null`, "sh", tree)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tar -czf: %v: %s", err, out)
		}
		return nil
	}, func() error {
		var err error
		size, err = c.DownloadArchive(ctx, tree, io.Discard, true)
		return err
	})
	if err != nil {
		return err
	}
	perSec := func(d time.Duration) float64 { return filesTreeFiles / d.Seconds() }
	b.rep.add(newFigure("13 files", "GET /files?format=tar.gz of 10,000 files of 1 KiB", perSec(agentTime), "files/s").
		withRef(perSec(ref), "tar -czf - DIR > /dev/null, same tree").ratioAtLeast(0.5).
		withNote("best of 2 each, in the order ref, agent, agent, ref: %.0f ms vs %.0f ms; archive %d KiB (gzip level 6, as tar -z)",
			ms(agentTime), ms(ref), size>>10))
	return nil
}

// writeTree writes filesTreeFiles files of filesTreeSize bytes of hex
// text (which compresses about as source code does), 100 per directory.
func writeTree(tree string) error {
	raw := make([]byte, filesTreeSize/2)
	for i := range filesTreeFiles {
		d := filepath.Join(tree, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		_, _ = crand.Read(raw)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), []byte(hex.EncodeToString(raw)), 0o644); err != nil {
			return err
		}
	}
	return nil
}
