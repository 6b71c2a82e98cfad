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

// env returns the environment c starts with: c.BaseEnv, or the
// Runner's, with c.Env added.
func (r *Runner) env(c Command) []string {
	base, extra := c.BaseEnv, c.Env
	if base == nil {
		base = r.baseEnv()
	}
	if len(extra) == 0 {
		return base
	}
	env := make([]string, len(base), len(base)+len(extra))
	copy(env, base)
	for k, v := range extra {
		env = append(env, k+"="+v) // exec keeps the last of duplicate keys
	}
	return env
}
