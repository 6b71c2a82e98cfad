package cgroups

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// agentLeaf is the child the agent moves itself into when its own cgroup
// has to hand the memory and pids controllers to its children: cgroup v2
// lets a cgroup that holds processes (other than the root) enable none.
const agentLeaf = "sandbox-executor"

// Probe finds the agent's own cgroup v2 directory (from /proc/self/cgroup
// and the cgroup2 mount in /proc/self/mountinfo) and makes it a place for
// leaves: memory and pids must be among its controllers, and enabled in
// its subtree. If they are not enabled yet, the agent moves itself into a
// child of its own first, which is allowed only if no other process is
// there. It returns an error wrapping ErrUnavailable, with the reason,
// where any step fails; it is called once, at start-up.
func Probe() (*Manager, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return nil, unavailable(err)
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, unavailable(err)
	}
	dir := Dir(filepath.Join(mount, own))
	if err := enable(dir); err != nil {
		return nil, unavailable(err)
	}
	return New(dir), nil
}

func unavailable(err error) error { return fmt.Errorf("%w: %v", ErrUnavailable, err) }

// enable makes memory and pids available to the children of dir.
func enable(dir Dir) error {
	ctrl, err := dir.ReadFile("cgroup.controllers")
	if err != nil {
		return err
	}
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(strings.Fields(string(ctrl)), c) {
			return fmt.Errorf("the %s controller is not available in %s", c, dir)
		}
	}
	sub, err := dir.ReadFile("cgroup.subtree_control")
	if err != nil {
		return err
	}
	if f := strings.Fields(string(sub)); slices.Contains(f, "memory") && slices.Contains(f, "pids") {
		return nil
	}
	if err := dir.Mkdir(agentLeaf); err != nil && !os.IsExist(err) {
		return err
	}
	if err := dir.WriteFile(agentLeaf+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return fmt.Errorf("moving the agent into %s: %w", dir.Path(agentLeaf), err)
	}
	if err := dir.WriteFile("cgroup.subtree_control", []byte("+memory +pids")); err != nil {
		return fmt.Errorf("enabling memory and pids in %s: %w", dir, err)
	}
	return nil
}

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 35 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4], nil
		}
	}
	return "", fmt.Errorf("no cgroup2 file system is mounted")
}

// ownCgroup returns the agent's cgroup v2 path, from the "0::" line of
// /proc/self/cgroup.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(p), nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 entry in /proc/self/cgroup")
}
