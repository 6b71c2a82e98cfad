package watch

import "sync"

// ring keeps a watch's last events, each numbered from 1 in the order it
// was made, and wakes readers when one is added.
type ring struct {
	// mu guards buf, first, next and wake: an event is numbered, stored
	// and announced under it, so a reader that read up to N and then
	// waits on wake never misses N+1.
	mu    sync.Mutex
	buf   []Event // a circular buffer of cap events; buf[(id-1)%cap] is event id
	size  int
	next  uint64        // the id the next event gets
	wake  chan struct{} // closed, and replaced, when an event is added
	first uint64        // the oldest id still held; next when none
}

func newRing(size int) *ring {
	return &ring{buf: make([]Event, size), size: size, next: 1, first: 1, wake: make(chan struct{})}
}

// add numbers e, stores it (dropping the oldest event if the ring is
// full) and wakes the readers.
func (r *ring) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.ID = r.next
	r.next++
	r.buf[(e.ID-1)%uint64(r.size)] = e
	if r.next-r.first > uint64(r.size) {
		r.first++
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// read appends to dst the events after id after, at most max of them, and
// returns it with the channel that is closed once there is a newer event
// than those returned. If events after after were dropped from the ring,
// the first event appended is an overflow saying how many, numbered with
// the id of the last dropped one, so that resuming after it is exact.
func (r *ring) read(dst []Event, after uint64, max int) ([]Event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if after+1 < r.first {
		dst = append(dst, Event{ID: r.first - 1, Type: TypeOverflow, Dropped: r.first - 1 - after,
			Reason: "the watch keeps its last " + itoa(r.size) + " events"})
		after = r.first - 1
	}
	for id := after + 1; id < r.next && len(dst) < max; id++ {
		dst = append(dst, r.buf[(id-1)%uint64(r.size)])
	}
	return dst, r.wake
}

// last returns the id of the newest event, 0 if none.
func (r *ring) last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next - 1
}
