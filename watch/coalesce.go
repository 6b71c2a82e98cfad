package watch

import "time"

// note reports the change e unless the filter hides it. Within the
// coalescing window, a change of a path that has one waiting merges into
// it, keeping the first op (a create then a write is a create), unless
// either is a remove or the new one a rename: the waiting change is then
// sent first, so each path's changes keep their order. moved marks the
// remove of a path renamed away, which the create of its new name may
// still turn into a rename.
func (w *Watch) note(e Event, moved bool) {
	if !w.f.reported(e.Path, e.IsDir) {
		return
	}
	e.Type = TypeChange
	if w.spec.Coalesce <= 0 && !moved {
		w.sendDropped()
		w.ring.add(e)
		return
	}
	if p := w.pending[e.Path]; p != nil {
		if p.Op != OpRemove && e.Op != OpRemove && e.Op != OpRename {
			p.IsDir = p.IsDir || e.IsDir
			return
		}
		w.send(p)
	}
	if len(w.pending) >= maxPending {
		w.drop(1, "more than "+itoa(maxPending)+" changes waited out their coalescing window at once")
		return
	}
	// A remove that a rename may claim waits for the create that follows
	// it in inotify's queue, even without coalescing: at most a moment.
	window := w.spec.Coalesce
	if window <= 0 {
		window = time.Millisecond
	}
	p := &pending{Event: e, due: time.Now().Add(window), moved: moved}
	w.pending[e.Path] = p
	w.queue = append(w.queue, p)
}

// send sends a waiting change now, out of its turn in the queue.
func (w *Watch) send(p *pending) {
	p.done = true
	delete(w.pending, p.Path)
	w.sendDropped()
	w.ring.add(p.Event)
}

// drop counts n changes lost for reason; the overflow is sent by
// sendDropped, before the next change, or at the next flush.
func (w *Watch) drop(n uint64, reason string) {
	w.dropped += n
	w.reason = reason
}

func (w *Watch) sendDropped() {
	if w.dropped == 0 {
		return
	}
	w.ring.add(Event{Type: TypeOverflow, Dropped: w.dropped, Reason: w.reason})
	w.dropped, w.reason = 0, ""
}

// flushDue sends the waiting changes whose window is over, oldest first,
// and a pending overflow.
func (w *Watch) flushDue(now time.Time) {
	for len(w.queue) > 0 {
		p := w.queue[0]
		if !p.done {
			if p.due.After(now) {
				break
			}
			w.send(p)
		}
		w.queue[0] = nil
		w.queue = w.queue[1:]
	}
	if len(w.queue) == 0 {
		w.queue = nil // let the burst's array go
	}
	w.sendDropped()
	for p, t := range w.moved {
		if now.Sub(t) >= moveMemory {
			delete(w.moved, p)
		}
	}
}

// arm sets the timer for the oldest waiting change.
func (w *Watch) arm() {
	for len(w.queue) > 0 && w.queue[0].done {
		w.queue[0] = nil
		w.queue = w.queue[1:]
	}
	if len(w.queue) == 0 {
		w.timer.Stop()
		return
	}
	w.timer.Reset(max(time.Until(w.queue[0].due), 0))
}
