package executor

import (
	"os/exec"

	"github.com/sandbox-executor/sandbox-executor/cgroups"
)

// Limited is a command with Limits (or none) that its caller starts and waits for
// itself, rather than through Start or Run: a code context's interpreter,
// which speaks with the agent over descriptors of its own. Runner.Limit
// makes one.
type Limited struct {
	r      *Runner
	cmd    *exec.Cmd
	limits Limits
	leaf   *cgroups.Leaf // removed by Ended
}

// Limit makes cmd, not yet started, apply l as Start would: the rlimits
// through the helper, which cmd then runs in place of its program (its
// Path and Args change; its Env, Dir, ExtraFiles and credential stay),
// and memory and pids through a cgroup leaf of its own. cmd.SysProcAttr
// must be set. It returns ErrLimitsUnsupported where r cannot apply l. The
// caller calls Started once cmd.Start has returned, and Ended once
// cmd.Wait has (or once Start failed): Ended removes the leaf.
func (r *Runner) Limit(cmd *exec.Cmd, l Limits) (*Limited, error) {
	// The caller starts cmd, not startCmd: the rlimits go through the
	// helper, never ptrace.
	leaf, _, err := r.limitCmd(cmd, l, false)
	if err != nil {
		return nil, err
	}
	return &Limited{r: r, cmd: cmd, limits: l, leaf: leaf}, nil
}

// Started closes what the start needed (the leaf's descriptor), whether
// or not cmd.Start succeeded; if it did, it raises the command's
// oom_score_adj above the agent's as Start does (Runner.OOMScoreAdj), so
// that when memory runs out the kernel kills the command first.
func (x *Limited) Started() {
	closeCgroupFD(x.cmd)
	if x.cmd.Process != nil {
		x.r.oom.adjust(x.cmd.Process.Pid, x.r.oomScoreAdj())
	}
}

// Ended returns how the command ended, once cmd.Wait has returned: its
// exit code or signal, and in Limit the limit that ended it, if one did
// (read from the leaf's counters before the leaf is removed). If the
// command never started, it only removes the leaf and returns the zero
// Result.
func (x *Limited) Ended() Result {
	ps := x.cmd.ProcessState
	if ps == nil {
		endLeaf(x.leaf)
		return Result{}
	}
	res := result(ps, false)
	res.Limit = limitFired(res, x.limits, endLeaf(x.leaf), cpuTime(ps))
	return res
}
