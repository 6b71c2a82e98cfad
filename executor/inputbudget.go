package executor

import "fmt"

// defaultMaxInput is Runner.MaxInput's default.
const defaultMaxInput = 256 << 20

func (r *Runner) maxInput() int64 {
	if r.MaxInput <= 0 {
		return defaultMaxInput
	}
	return r.MaxInput
}

// takeInput counts n bytes of a command's input against MaxInput, or
// returns an error wrapping ErrInputBudget if they would pass it.
// An input larger than the whole budget is refused however empty it is.
func (r *Runner) takeInput(n int) error {
	if n == 0 {
		return nil
	}
	limit := r.maxInput()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inputHeld+int64(n) > limit {
		return fmt.Errorf("%w: commands have not yet read %d bytes of input, and this command's %d more would pass the input budget of %d bytes; retry once they have",
			ErrInputBudget, r.inputHeld, n, limit)
	}
	r.inputHeld += int64(n)
	return nil
}

// giveInput gives back n bytes taken by takeInput.
func (r *Runner) giveInput(n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inputHeld -= int64(n)
}

// InputHeld returns the bytes of input that commands have not read yet, as
// MaxInput counts them.
func (r *Runner) InputHeld() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inputHeld
}

// InputBudget returns MaxInput, or its default if zero.
func (r *Runner) InputBudget() int64 { return r.maxInput() }
