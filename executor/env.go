package executor

import (
	"os"
	"slices"
)

// Environ returns a copy of the environment commands start from: Env,
// or the agent's own environment if Env is nil. A session takes it as the
// first state of its environment (Command.BaseEnv).
func (r *Runner) Environ() []string {
	if r.Env != nil {
		return slices.Clone(r.Env)
	}
	return os.Environ()
}

// baseEnv is Environ without the copy, for a start that copies anyway.
func (r *Runner) baseEnv() []string {
	if r.Env != nil {
		return r.Env
	}
	return os.Environ()
}
