package server

import (
	"context"
	"testing"
)

// contextWithCancel returns a context that the test can cancel early and
// that is cancelled when it ends.
func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return ctx, cancel
}
