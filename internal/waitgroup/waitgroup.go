// Package waitgroup waits for a sync.WaitGroup within a context, as every
// registry's Close does.
package waitgroup

import (
	"context"
	"sync"
)

// Wait waits until wg's counter is zero and returns nil, or returns
// ctx.Err() if ctx ends first. The goroutines wg counts must already have
// been told to end (their connections closed, their processes killed), so
// that they end soon either way.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go waitAll(wg, done)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitAll closes done when wg's counter reaches zero.
//
// waitAll runs in its own goroutine; it ends when the goroutines wg counts
// have, which the caller of Wait has made prompt. If Wait's ctx ends
// first, waitAll outlives Wait.
func waitAll(wg *sync.WaitGroup, done chan<- struct{}) {
	wg.Wait()
	close(done)
}
