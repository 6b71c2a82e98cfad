package executor

import (
	"context"
	"time"
)

// ChunkFunc receives what one read of one pipe returned, exactly as the
// command wrote it: no line splitting, nothing added or repaired. The
// bytes read are b[head:], after the head bytes StartStream was asked to
// leave free, which the ChunkFunc may write (a frame's header, so that it
// sends b whole without copying the bytes). The slice is only valid during
// the call. The stdout and stderr readers call it from two goroutines,
// possibly at the same time. A ChunkFunc that blocks holds up its pipe,
// and so, once the pipe is full, the command: that is how a slow consumer
// slows the command down instead of growing a buffer.
type ChunkFunc func(s Stream, b []byte)

// streamReadSize is the most StartStream reads at once, and so the most
// bytes a chunk holds (less than 1 MiB, so that with a header of a few
// bytes it fits in a message of 1 MiB). Its pipes are grown to
// stdinPipeSize, the most a pipe may hold without CAP_SYS_RESOURCE. Each
// chunk costs the command, the agent and an /exec_ws client a wake-up:
// against Run's 64 KiB from a 64 KiB pipe, 256 KiB chunks took the agent's
// CPU for a 1 GiB stream from 0.64 to 0.40 s, and chunks of this size to
// 0.33–0.36 s (figure 17). The pages are the kernel's, and only while they
// hold output not yet read; a buffer is held only while a chunk is pending
// (see buffers).
const streamReadSize = 1<<20 - 1<<10

// StartStream starts c and hands its output to fn as raw chunks as it is
// read, of at most streamReadSize bytes after head free bytes; see
// ChunkFunc. When ctx ends, the process group is killed. Every chunk has
// been handed to fn before Wait returns. Its errors are Run's.
func (r *Runner) StartStream(ctx context.Context, c Command, head int, fn ChunkFunc) (*Process, error) {
	return r.start(ctx, c, buffers{pool: &r.streamBufs, size: head + streamReadSize, head: head, grow: true}, chunkConsumer(Stdout, head, fn), chunkConsumer(Stderr, head, fn))
}

// chunkConsumer returns a consume function that hands everything read to
// fn at once, after head free bytes.
func chunkConsumer(s Stream, head int, fn ChunkFunc) consumeFunc {
	return func(b []byte, _ time.Time, _ bool) int {
		if len(b) > head {
			fn(s, b)
		}
		return len(b)
	}
}
