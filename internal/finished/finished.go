// Package finished bounds what a registry keeps of the things that have
// finished (background processes, terminals): how many stay listed, and
// how many bytes of output they keep between them.
package finished

// Bounds are what a List keeps.
type Bounds[T any] struct {
	// MaxItems is how many finished items stay listed; past it, the ones
	// that finished first are forgotten.
	MaxItems int
	// MaxBytes bounds the output the listed items keep together; past
	// it, the ones that finished first lose their output, and stay listed.
	MaxBytes int
	// Bytes returns the output an item keeps now (it may shrink, as log
	// budget trims shrink a process's lines), and Release drops it.
	Bytes   func(T) int
	Release func(T)
}

// List holds a registry's finished items in the order they finished. The
// zero List is empty and ready. It is not safe for concurrent use: the
// registry's lock guards it.
type List[T comparable] struct {
	items []T
}

// Add appends t, the item that finished last, and applies b: the oldest
// items lose their output first, never t itself (a reader that comes
// right after the end should see it), then the oldest past b.MaxItems
// are dropped from the list. It returns those, for the registry to forget.
// The bytes are summed afresh, once per finished item, not per line.
func (l *List[T]) Add(t T, b Bounds[T]) (forgotten []T) {
	l.items = append(l.items, t)
	total := 0
	for _, it := range l.items {
		total += b.Bytes(it)
	}
	for i := 0; total > b.MaxBytes && i < len(l.items)-1; i++ {
		total -= b.Bytes(l.items[i])
		b.Release(l.items[i])
	}
	for len(l.items) > b.MaxItems {
		forgotten = append(forgotten, l.items[0])
		var zero T
		l.items[0] = zero
		l.items = l.items[1:]
	}
	return forgotten
}

// Len returns how many finished items are listed.
func (l *List[T]) Len() int { return len(l.items) }

// Last returns the item that finished last, and false if there is none.
func (l *List[T]) Last() (T, bool) {
	var zero T
	if len(l.items) == 0 {
		return zero, false
	}
	return l.items[len(l.items)-1], true
}

// Remove takes t out of the list, as if it had been forgotten, and
// reports whether it was there.
func (l *List[T]) Remove(t T) bool {
	for i, it := range l.items {
		if it == t {
			l.items = append(l.items[:i], l.items[i+1:]...)
			var zero T
			l.items[:len(l.items)+1][len(l.items)] = zero // the array must not keep it
			return true
		}
	}
	return false
}
