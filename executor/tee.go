package executor

import (
	"context"
	"time"
)

// RawFunc receives the bytes of one read from one pipe, exactly as they
// were read: nothing split, nothing dropped, no line ending removed. Like
// a LineFunc's lines, b is only valid during the call, and the two pipes'
// readers may call it at the same time.
type RawFunc func(s Stream, t time.Time, b []byte)

// StartTee is Start that also hands raw, if not nil, every byte the
// command writes, as it is read and before fn gets it as lines: so a
// prompt without a line ending (`Password: `) is seen at once.
func (r *Runner) StartTee(ctx context.Context, c Command, fn LineFunc, raw RawFunc) (*Process, error) {
	maxLine := r.maxLine()
	stdout, stderr := lineConsumer(Stdout, maxLine, fn), lineConsumer(Stderr, maxLine, fn)
	if raw != nil {
		stdout, stderr = teeConsumer(Stdout, raw, stdout), teeConsumer(Stderr, raw, stderr)
	}
	return r.start(ctx, c, buffers{pool: &r.lineBufs, size: maxLine + readSize}, stdout, stderr)
}

// teeConsumer hands raw the bytes of each read that next has not been
// shown yet, then calls next. What next leaves unused stays at the front
// of the buffer for its next call, so those bytes were already raw's.
func teeConsumer(s Stream, raw RawFunc, next consumeFunc) consumeFunc {
	seen := 0 // bytes at the front of b that raw already has
	return func(b []byte, t time.Time, eof bool) int {
		if len(b) > seen {
			raw(s, t, b[seen:])
		}
		used := next(b, t, eof)
		seen = len(b) - used
		return used
	}
}
