package procs

import "slices"

// Forget drops the process with the given id, which has ended, at once,
// as the finished bounds would: its lines and output go, and it is no
// longer listed. A /run whose command ended within yield_ms gave its
// whole result, and must not push others out of the list.
func (r *Registry) Forget(id string) {
	r.mu.Lock()
	p, ok := r.procs[id]
	if !ok {
		r.mu.Unlock()
		return
	}
	delete(r.procs, id)
	r.forgetNameLocked(p)
	r.order = slices.DeleteFunc(r.order, func(q *Process) bool { return q == p })
	listed := r.finished.Remove(p)
	if !listed {
		p.forgotten = true // it ended, and its watch has not retired it yet: retire skips it
	}
	r.mu.Unlock()
	if listed {
		p.releaseLogs()
		r.budget.leave(p)
	}
}
