package contexts

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// Config is what a context is created with.
type Config struct {
	Language string            // "python" or "javascript"
	Dir      string            // the interpreter's working directory; empty is the agent's
	Env      map[string]string // added to BaseEnv
	// BaseEnv, if not nil, is the environment Env is added to, in place
	// of the agent's environment for commands: a session's.
	BaseEnv []string
	// Alive, if not nil, is asked once a second whether what the context
	// belongs to still exists; once it says no, the context is deleted.
	// A session's context dies with its session so.
	Alive func() bool
	User  *executor.User // if not nil, the interpreter runs as that user
	// IdleTimeout deletes the context once no call has run for that
	// long. If zero, it is never deleted for idleness.
	IdleTimeout time.Duration
	// Hidden leaves the context out of List: a stateless run's.
	Hidden bool
	// Limits bound the interpreter and everything it starts, as a
	// command's (see executor.Limits), generation by generation: a
	// restarted interpreter has them afresh. The zero value sets none.
	Limits executor.Limits
}

// Status is what List and Context.Status report of a context.
type Status struct {
	ID             string  `json:"id"`
	Language       string  `json:"language"`
	Generation     int     `json:"generation"`
	Pid            int     `json:"pid"`
	Busy           bool    `json:"busy"`
	ExecutionCount int     `json:"execution_count"`
	LastStatus     *string `json:"last_status"` // nil before the first call
	// LastOutput is the end of the last call's output, set only if its
	// client left before the call's end.
	LastOutput *string `json:"-"`
	// Limits are the context's limits (Config.Limits).
	Limits executor.Limits `json:"-"`
}

// RestartedError is ErrRestarted with the generation the context is at.
type RestartedError struct{ Generation int }

func (e *RestartedError) Error() string { return ErrRestarted.Error() }
func (e *RestartedError) Unwrap() error { return ErrRestarted }

// Context is one interpreter whose state lasts between calls. Its
// interpreter may be restarted (after a kill, a crash, a malformed
// frame): each start is a new generation, and a call that saw one says
// state_lost.
type Context struct {
	id      string
	reg     *Registry
	spec    language
	cfg     Config
	created time.Time
	quit    chan struct{} // closed by shutdown

	// mu guards the fields below. turn is the call that holds the
	// interpreter; waiters are those queued for it, first first, each
	// woken by closing its channel once the turn is its.
	mu         sync.Mutex
	it         *interp
	generation int
	count      int // calls made, across restarts
	lastStatus string
	lastUsed   time.Time
	turn       *Call
	waiters    []chan struct{}
	deleted    bool
	interrupts chan chan InterruptResult // to the running call's loop
	lastOutput *string                   // see Status.LastOutput
}

func newContext(r *Registry, id string, spec language, cfg Config) *Context {
	return &Context{id: id, reg: r, spec: spec, cfg: cfg, created: time.Now(), lastUsed: time.Now(),
		quit: make(chan struct{}), interrupts: make(chan chan InterruptResult)}
}

// ID returns the context's id.
func (c *Context) ID() string { return c.id }

// start starts the interpreter as the next generation and waits for its
// worker's ready frame.
func (c *Context) start(ctx context.Context) error {
	it, err := c.reg.startInterp(c.spec, c.cfg, c.deliver)
	if err != nil {
		return err
	}
	timer := time.NewTimer(c.reg.startTimeout())
	defer timer.Stop()
	select {
	case f, ok := <-it.frames:
		if ok && f.Type == "ready" {
			it.ready.Store(true)
			break
		}
		res, own := it.ownEnd(c.reg.grace())
		it.kill()
		return startFailure(it, res, own, c.spec, c.cfg.Limits)
	case <-timer.C:
		it.kill()
		return fmt.Errorf("%w within %s", ErrStart, c.reg.startTimeout())
	case <-ctx.Done():
		it.kill()
		return ctx.Err()
	}
	c.mu.Lock()
	c.it = it
	c.generation++
	c.mu.Unlock()
	return nil
}

// deliver hands output of the interpreter to the running call, if any.
func (c *Context) deliver(stream int, text string) {
	c.mu.Lock()
	call := c.turn
	c.mu.Unlock()
	if call == nil || call.finished == nil {
		return // written between calls (a thread of the code's): no call to give it to
	}
	name := "stdout"
	if stream == 1 {
		name = "stderr"
	}
	call.push(Event{Name: name, Data: map[string]any{"data": text}, size: len(text)})
}

// Status returns the context's status.
func (c *Context) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Status{ID: c.id, Language: c.cfg.Language, Generation: c.generation, Busy: c.turn != nil,
		ExecutionCount: c.count, LastOutput: c.lastOutput, Limits: c.cfg.Limits}
	if c.it != nil {
		st.Pid = c.it.pid
	}
	if c.lastStatus != "" {
		s := c.lastStatus
		st.LastStatus = &s
	}
	return st
}

func (c *Context) idleSince(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.IdleTimeout > 0 && c.turn == nil && len(c.waiters) == 0 && now.Sub(c.lastUsed) >= c.cfg.IdleTimeout
}

// orphaned reports whether what the context belongs to is gone.
func (c *Context) orphaned() bool { return c.cfg.Alive != nil && !c.cfg.Alive() }

// RunRequest is one call of code in a context.
type RunRequest struct {
	Code string
	// Timeout, if positive, interrupts the code after that long, as
	// Interrupt does, and the call ends "timeout".
	Timeout time.Duration
	// ExpectedGeneration, if positive, refuses the call with a
	// *RestartedError unless the context is at that generation.
	ExpectedGeneration int
	// Queue waits for a busy context, at most MaxQueue calls deep,
	// rather than returning ErrBusy.
	Queue bool
}

// Run starts req once the context is free and returns the call, whose
// events the caller reads with Call.Next. ctx bounds the wait in the
// queue only: once started, the code runs to its end whoever reads.
func (c *Context) Run(ctx context.Context, req RunRequest) (*Call, error) {
	call := newCall(c.reg.maxOutput())
	if err := c.takeTurn(ctx, call, req); err != nil {
		return nil, err
	}
	c.reg.wg.Add(1)
	go c.execute(call, req)
	return call, nil
}

// takeTurn makes call the context's running call, queued behind those
// before it if req.Queue.
func (c *Context) takeTurn(ctx context.Context, call *Call, req RunRequest) error {
	c.mu.Lock()
	if err := c.checkLocked(req); err != nil {
		c.mu.Unlock()
		return err
	}
	if c.turn == nil {
		c.beginLocked(call)
		c.mu.Unlock()
		return nil
	}
	if !req.Queue {
		c.mu.Unlock()
		return ErrBusy
	}
	if len(c.waiters) >= MaxQueue {
		c.mu.Unlock()
		return fmt.Errorf("%w (%d calls wait)", ErrQueueFull, MaxQueue)
	}
	wake := make(chan struct{})
	c.waiters = append(c.waiters, wake)
	c.mu.Unlock()
	select {
	case <-wake:
	case <-ctx.Done():
		c.mu.Lock()
		if i := indexOf(c.waiters, wake); i >= 0 {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			c.mu.Unlock()
			return ctx.Err()
		}
		c.mu.Unlock()
		// The turn was handed over as the caller left: pass it on.
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The turn is ours (turn was left nil for us), unless the context
	// was deleted.
	if c.deleted {
		return ErrNotFound // shutdown woke every waiter; there is no turn to pass
	}
	err := ctx.Err()
	if err == nil {
		err = c.checkLocked(req)
	}
	if err != nil {
		c.passTurnLocked()
		return err
	}
	c.beginLocked(call)
	return nil
}

func (c *Context) checkLocked(req RunRequest) error {
	if c.deleted {
		return ErrNotFound
	}
	if req.ExpectedGeneration > 0 && req.ExpectedGeneration != c.generation {
		return &RestartedError{Generation: c.generation}
	}
	return nil
}

func (c *Context) beginLocked(call *Call) {
	c.turn = call
	c.count++
	call.count = c.count
	c.lastOutput = nil
	c.lastUsed = time.Now()
}

// passTurnLocked frees the context, or hands it to the first waiter.
func (c *Context) passTurnLocked() {
	c.turn = nil
	c.lastUsed = time.Now()
	if len(c.waiters) > 0 {
		wake := c.waiters[0]
		c.waiters = c.waiters[1:]
		// A placeholder holds the turn until the waiter takes it, so
		// that no newcomer slips in.
		c.turn = &Call{}
		close(wake)
	}
}

func indexOf(s []chan struct{}, c chan struct{}) int {
	for i, x := range s {
		if x == c {
			return i
		}
	}
	return -1
}

// InterruptResult is what Interrupt reports once the code has stopped.
type InterruptResult struct {
	Interrupted bool `json:"interrupted"`
	StateLost   bool `json:"state_lost"`
	Generation  int  `json:"generation"`
}

// Interrupt sends SIGINT to the running code and waits until it has
// stopped: by itself, or killed with its interpreter restarted after the
// grace period. On an idle context it does nothing and says so.
func (c *Context) Interrupt(ctx context.Context) (InterruptResult, error) {
	c.mu.Lock()
	call, deleted := c.turn, c.deleted
	gen := c.generation
	c.mu.Unlock()
	if deleted {
		return InterruptResult{}, ErrNotFound
	}
	if call == nil || call.finished == nil {
		return InterruptResult{Generation: gen}, nil
	}
	reply := make(chan InterruptResult, 1)
	select {
	case c.interrupts <- reply:
	case <-call.finished:
		c.mu.Lock()
		defer c.mu.Unlock()
		return InterruptResult{Generation: c.generation}, nil
	case <-ctx.Done():
		return InterruptResult{}, ctx.Err()
	}
	select {
	case res := <-reply:
		return res, nil
	case <-ctx.Done():
		return InterruptResult{}, ctx.Err()
	}
}

// shutdown kills the interpreter, ends a running call and refuses the
// queued ones. It returns once the running call has ended.
func (c *Context) shutdown() {
	c.mu.Lock()
	if c.deleted {
		c.mu.Unlock()
		return
	}
	c.deleted = true
	close(c.quit)
	for _, w := range c.waiters {
		close(w)
	}
	c.waiters = nil
	call := c.turn
	c.mu.Unlock()
	if call != nil && call.finished != nil {
		<-call.finished
	}
	c.mu.Lock()
	it := c.it
	c.it = nil
	c.mu.Unlock()
	if it != nil {
		it.kill()
	}
}

// Event is one event of a call: stdout, stderr, display, result or error,
// with the data of its SSE event.
type Event struct {
	Name string
	Data any
	size int // bytes of its data, roughly, for the call's queue cap
}

// rawEvent returns the event of a display, result or error frame.
func rawEvent(f frame) Event {
	switch f.Type {
	case "error":
		tb := f.Traceback
		if tb == nil {
			tb = []string{}
		}
		size := len(f.Name) + len(f.Value)
		for _, l := range tb {
			size += len(l)
		}
		return Event{Name: "error", Data: map[string]any{"name": f.Name, "value": f.Value, "traceback": tb}, size: size}
	}
	size := 0
	for _, v := range f.Data {
		size += len(v)
	}
	d := map[string]any{"data": f.Data}
	if f.Data == nil {
		d["data"] = map[string]json.RawMessage{}
	}
	if f.Truncated {
		d["truncated"] = true
	}
	return Event{Name: f.Type, Data: d, size: size}
}
