package contexts

import (
	"sync"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// tailSize is how much of a call's output Status.LastOutput keeps.
const tailSize = 64 << 10

// Completion is how a call ended: its complete event.
type Completion struct {
	Status         string `json:"status"` // ok, error, interrupted or timeout
	ExecutionCount int    `json:"execution_count"`
	Generation     int    `json:"generation"`
	// StateLost is set if the interpreter was restarted during the call:
	// every variable, import and function of the context is gone.
	StateLost  bool  `json:"state_lost"`
	DurationMS int64 `json:"duration_ms"`
	// Termination is how the interpreter ended during the call when it
	// ended by itself: a limit (cpu_limit ...), its own exit, or a signal
	// the agent did not send. Nil when it lives, and when the agent
	// killed it (the status and the ContextRestarted error say why).
	Termination *executor.Termination `json:"termination,omitempty"`
}

// Call is one run of code in a context. Its events queue until the
// reader takes them; past a cap the interpreter's output waits for the
// reader, as a terminal's would. Once the reader detaches, the code runs
// on and only the end of its output is kept (Status.LastOutput).
type Call struct {
	count    int           // the context's execution_count for this call
	finished chan struct{} // closed once Completion is set; nil for a turn's placeholder
	maxQueue int

	// mu guards the fields below. ready has a value whenever events or
	// the completion wait to be taken; room is closed and replaced
	// whenever the queue is emptied.
	mu         sync.Mutex
	events     []Event
	queued     int // bytes of events, roughly
	ready      chan struct{}
	room       chan struct{}
	detached   bool
	tail       []byte
	completion *Completion
}

func newCall(maxOutput int) *Call {
	return &Call{finished: make(chan struct{}), maxQueue: 2 * maxOutput,
		ready: make(chan struct{}, 1), room: make(chan struct{})}
}

// push queues ev for the reader, waiting while the queue is past its cap
// and a reader is attached.
func (c *Call) push(ev Event) {
	size := eventSize(ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Name == "stdout" || ev.Name == "stderr" {
		c.tail = appendTail(c.tail, ev.Data.(map[string]any)["data"].(string))
	}
	for !c.detached && c.queued > 0 && c.queued+size > c.maxQueue {
		room := c.room
		c.mu.Unlock()
		<-room
		c.mu.Lock()
	}
	if c.detached {
		return
	}
	c.events = append(c.events, ev)
	c.queued += size
	c.signalLocked()
}

func (c *Call) signalLocked() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// Ready returns a channel that has a value when Take has something new.
func (c *Call) Ready() <-chan struct{} { return c.ready }

// Take returns the events queued since the last Take and, once every
// event has been taken, the call's completion (else nil).
func (c *Call) Take() ([]Event, *Completion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) > 0 {
		evs := c.events
		c.events, c.queued = nil, 0
		close(c.room)
		c.room = make(chan struct{})
		if c.completion != nil {
			c.signalLocked()
		}
		return evs, nil
	}
	return nil, c.completion
}

// Detach says the reader has left: the code runs on, its events are
// dropped, and the end of its output is kept for Status.LastOutput.
func (c *Call) Detach() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detached {
		return
	}
	c.detached = true
	c.events, c.queued = nil, 0
	close(c.room)
	c.room = make(chan struct{})
}

func (c *Call) finish(comp Completion) {
	c.mu.Lock()
	c.completion = &comp
	c.signalLocked()
	c.mu.Unlock()
	close(c.finished)
}

// lastOutput returns the end of the call's output if its reader left
// before the end, else nil.
func (c *Call) lastOutput() *string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.detached {
		return nil
	}
	s := string(c.tail)
	return &s
}

func appendTail(tail []byte, s string) []byte {
	tail = append(tail, s...)
	if over := len(tail) - tailSize; over > 0 {
		// Cut at a character's start, so the tail stays valid UTF-8.
		for over < len(tail) && tail[over]&0xC0 == 0x80 {
			over++
		}
		tail = append(tail[:0], tail[over:]...)
	}
	return tail
}

func eventSize(ev Event) int { return ev.size + 64 }
