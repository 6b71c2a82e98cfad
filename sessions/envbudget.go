package sessions

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrEnvBudget is returned by Create, and by Call.Finish for a state it
// did not commit, when the environments of all sessions together would
// pass Options.MaxEnvBytes; the error text names the budget and its size.
var ErrEnvBudget = errors.New("session environment budget exhausted")

// defaultMaxEnvBytes is Options.MaxEnvBytes' default.
const defaultMaxEnvBytes = 64 << 20

// envEntryOverhead is what an environment entry costs beyond its text: a
// string header in the slice that holds it.
const envEntryOverhead = 16

// envSize returns what env costs, as Options.MaxEnvBytes counts it.
func envSize(env []string) int64 {
	n := int64(0)
	for _, kv := range env {
		n += int64(len(kv)) + envEntryOverhead
	}
	return n
}

// envBudget bounds the environments of all sessions of a Registry. It is
// lock-free: a commit changes it with a session's mu held, under which the
// registry's mu may not be taken.
type envBudget struct {
	max  int64
	used atomic.Int64
}

// take adds n bytes, or returns an error wrapping ErrEnvBudget if that
// would pass max; what says who needs them ("a new session needs").
func (b *envBudget) take(n int64, what string) error {
	for {
		used := b.used.Load()
		if used+n > b.max {
			return fmt.Errorf("%w: sessions hold %d bytes of environment; %s %d more, past the session environment budget of %d bytes",
				ErrEnvBudget, used, what, n, b.max)
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// give gives back n bytes taken.
func (b *envBudget) give(n int64) { b.used.Add(-n) }

// resize replaces old bytes taken with n: it takes the growth, if any,
// as take does, or gives back the difference.
func (b *envBudget) resize(old, n int64, what string) error {
	if n <= old {
		b.give(old - n)
		return nil
	}
	return b.take(n-old, what)
}
