package procs

import (
	"context"

	"github.com/sandbox-executor/sandbox-executor/readiness"
)

// readyProbe is a process's readiness probe. Its spec is fixed at start;
// passed is closed once the probe passed, ended once it stopped, passed or
// not, after res is set.
type readyProbe struct {
	spec   readiness.Spec
	passed chan struct{}
	ended  chan struct{}
	res    readiness.Result
}

// ReadyState is the readiness of a process started with
// StartOptions.Ready.
type ReadyState struct {
	Spec   readiness.Spec
	Ready  bool
	Ended  bool             // the probe stopped: it passed, timed out, or the process ended
	Result readiness.Result // how it stopped, once Ended
}

// Ready returns p's readiness, and false if p was started without a
// probe.
func (p *Process) Ready() (ReadyState, bool) {
	rp := p.ready
	if rp == nil {
		return ReadyState{}, false
	}
	st := ReadyState{Spec: rp.spec}
	select {
	case <-rp.ended:
		st.Ended, st.Result, st.Ready = true, rp.res, rp.res.Ready
	default:
	}
	return st, true
}

// WaitReady waits until p's probe has stopped, p has ended, or ctx ends,
// and returns p's readiness then. It returns false at once if p has no
// probe.
func (p *Process) WaitReady(ctx context.Context) (ReadyState, bool) {
	rp := p.ready
	if rp == nil {
		return ReadyState{}, false
	}
	select {
	case <-rp.ended:
	case <-p.done:
	case <-ctx.Done():
	}
	return p.Ready()
}

// probeReady runs p's readiness probe. It runs in its own goroutine,
// counted in r.wg; it ends when the probe passes, its timeout passes, or
// p ends (Close kills every process, so it ends with them).
func (r *Registry) probeReady(p *Process) {
	defer r.wg.Done()
	rp := p.ready
	rp.res = readiness.Wait(context.Background(), rp.spec, p.done)
	if rp.res.Ready {
		close(rp.passed)
	}
	close(rp.ended)
}
