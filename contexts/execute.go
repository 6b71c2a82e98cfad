package contexts

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// outcome is how the code of a call ended, as the execute loop saw it.
type outcome struct {
	status string
	lost   bool // the interpreter was restarted (or is gone): its state is lost
	// term is how the interpreter ended, if it ended by itself (its own
	// exit, a signal the agent did not send, a limit) during the call.
	term *executor.Termination
}

// execute runs call to its end and frees the context. It runs in its own
// goroutine, which the Registry's wg counts; it ends once the code has
// ended (or its interpreter was killed), whether or not anyone reads.
func (c *Context) execute(call *Call, req RunRequest) {
	defer c.reg.wg.Done()
	start := time.Now()
	c.mu.Lock()
	it := c.it
	c.mu.Unlock()
	var out outcome
	if it == nil {
		// The last restart failed: this call tries again.
		out = outcome{status: "error", lost: true}
		c.restart(call, "its interpreter was not running")
	} else {
		out = c.runOn(it, call, req)
	}
	c.mu.Lock()
	c.lastStatus = out.status
	comp := Completion{Status: out.status, ExecutionCount: call.count, Generation: c.generation,
		StateLost: out.lost, DurationMS: time.Since(start).Milliseconds(), Termination: out.term}
	c.lastOutput = call.lastOutput()
	c.passTurnLocked()
	c.mu.Unlock()
	call.finish(comp)
	if c.cfg.Hidden {
		_ = c.reg.Delete(c.id) // a stateless run's context lives for one call
	}
}

// runOn sends the code to it and follows the call to its end: the
// worker's done frame, or a kill and restart when the code does not stop
// within the grace period after SIGINT, when the worker dies, or when it
// sends what it could not have sent.
func (c *Context) runOn(it *interp, call *Call, req RunRequest) outcome {
	_ = it.toW.SetWriteDeadline(time.Now().Add(c.reg.startTimeout()))
	err := writeFrame(it.toW, frame{Type: "execute", Code: req.Code, Count: call.count, MaxOutput: c.reg.maxOutput()})
	if err != nil {
		// It may have ended between calls, a limit's doing or its own.
		return c.loseEnded(it, call, "error", "its interpreter was not reading")
	}
	var timeout, grace <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	why := "" // "timeout" or "interrupted" once SIGINT was sent
	var replies []chan InterruptResult
	interrupt := func(reason string) {
		if why == "" {
			why = reason
		}
		if grace == nil {
			it.signal(syscall.SIGINT)
			grace = time.After(c.reg.grace())
		}
	}
	answer := func(o outcome) outcome {
		c.mu.Lock()
		res := InterruptResult{Interrupted: o.status != "ok" && o.status != "error" || o.lost, StateLost: o.lost, Generation: c.generation}
		c.mu.Unlock()
		for _, r := range replies {
			r <- res
		}
		return o
	}
	for {
		select {
		case f, ok := <-it.frames:
			switch {
			case !ok && it.badFrame != nil:
				return answer(c.lose(it, call, orStatus(why, "error"), "its worker sent a malformed frame"))
			case !ok:
				return answer(c.loseEnded(it, call, orStatus(why, "error"), "its interpreter exited"))
			case f.Type == "ready" || f.Type == "done" && f.Count != call.count:
				// A done frame for another call: forged, or stale.
				return answer(c.lose(it, call, orStatus(why, "error"), "its worker sent an unexpected frame"))
			case f.Type == "done":
				if !it.waitDrained([2]int64{f.Stdout, f.Stderr}, c.reg.grace()) {
					call.push(Event{Name: "stderr", Data: map[string]any{"data": "[sandbox: some output of this call may arrive late or be missing]\n"}})
				}
				status := f.Status
				if status == "interrupted" && why == "timeout" {
					status = "timeout"
				}
				return answer(outcome{status: status})
			default:
				// The output written before the frame goes first.
				it.waitRead([2]int64{f.Stdout, f.Stderr}, c.reg.grace())
				call.push(rawEvent(f))
			}
		case <-timeout:
			interrupt("timeout")
		case r := <-c.interrupts:
			replies = append(replies, r)
			interrupt("interrupted")
		case <-grace:
			return answer(c.lose(it, call, why, fmt.Sprintf("the code did not stop within %s of SIGINT", c.reg.grace())))
		case <-c.quit:
			it.kill()
			call.push(Event{Name: "error", Data: map[string]any{"name": "ContextDeleted", "value": "the context was deleted while the code ran", "traceback": []string{}}})
			return answer(outcome{status: "interrupted", lost: true})
		}
	}
}

func orStatus(why, otherwise string) string {
	if why != "" {
		return why
	}
	return otherwise
}

// loseEnded is lose for an interpreter that may have ended by itself: it
// waits a grace period for its end, and if it came, says how in the
// call's error event and its termination.
func (c *Context) loseEnded(it *interp, call *Call, status, why string) outcome {
	res, own := it.ownEnd(c.reg.grace())
	if !own {
		return c.lose(it, call, status, why)
	}
	term, said := endOf(res)
	out := c.lose(it, call, status, said)
	out.term = &term
	return out
}

// lose kills it, says why in an error event, and restarts the
// interpreter: the call ends with status and its state lost.
func (c *Context) lose(it *interp, call *Call, status, why string) outcome {
	it.kill()
	c.mu.Lock()
	if c.it == it {
		c.it = nil
	}
	c.mu.Unlock()
	c.restart(call, why)
	return outcome{status: status, lost: true}
}

// restart starts a new generation of the interpreter and tells call, in
// an error event, that the state was lost and why.
func (c *Context) restart(call *Call, why string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go cancelOnQuit(c.quit, stop, cancel)
	msg := why + "; it was restarted and the context's state (variables, imports, functions) is lost"
	if err := c.start(ctx); err != nil {
		msg = why + "; restarting it failed (" + err.Error() + "): the context's state is lost, and the next call tries again"
	}
	call.push(Event{Name: "error", Data: map[string]any{"name": "ContextRestarted", "value": msg, "traceback": []string{}}, size: len(msg)})
}

// cancelOnQuit runs in its own goroutine; it ends when quit or stop is
// closed, and cancels on quit.
func cancelOnQuit(quit, stop <-chan struct{}, cancel context.CancelFunc) {
	select {
	case <-quit:
		cancel()
	case <-stop:
	}
}
