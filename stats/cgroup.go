package stats

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// mount is a cgroup file system mounted in the agent's mount namespace.
type mount struct {
	point       string   // where it is mounted
	root        string   // the part of the hierarchy mounted there
	v2          bool     // cgroup2 rather than a v1 hierarchy
	controllers []string // a v1 hierarchy's controllers, such as [cpu cpuacct]
}

// findCgroups finds the directories of the cgroups the agent runs in: for
// each v1 controller it reads and for the v2 hierarchy, the mount that
// holds it joined with the agent's path in /proc/self/cgroup. A path that
// is not under the mount's root, or not there (a container that sees its
// own cgroup mounted at the top without a cgroup namespace), falls back to
// the mount point itself. A directory that does not exist stays "".
func (r *Reader) findCgroups() {
	mounts := r.cgroupMounts()
	paths := r.cgroupPaths()
	for _, m := range mounts {
		if m.v2 {
			if p, ok := paths[""]; ok && r.unified == "" {
				r.unified = cgroupDir(m, p)
			}
			continue
		}
		for _, c := range m.controllers {
			p, ok := paths[c]
			if !ok {
				continue
			}
			switch dir := cgroupDir(m, p); c {
			case "cpuacct":
				r.cpuacct1 = dir
			case "cpu":
				r.cpu1 = dir
			case "memory":
				r.mem1 = dir
			}
		}
	}
}

// cgroupDir returns the directory of cgroup path p within m, or m's mount
// point if that directory does not exist, or "" if neither does.
func cgroupDir(m mount, p string) string {
	if rel, ok := strings.CutPrefix(p, m.root); ok && (m.root == "/" || rel == "" || rel[0] == '/') {
		dir := filepath.Join(m.point, rel)
		if isDir(dir) {
			return dir
		}
	}
	if isDir(m.point) {
		return m.point
	}
	return ""
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// cgroupMounts reads the cgroup mounts of /proc/self/mountinfo, whose lines
// are "id parent major:minor root point options [optional...] - fstype
// source superoptions".
func (r *Reader) cgroupMounts() []mount {
	b, err := os.ReadFile(r.root + "/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mounts []mount
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || sep+3 > len(f) {
			continue
		}
		m := mount{point: r.root + unescapeMount(f[4]), root: unescapeMount(f[3])}
		switch f[sep+1] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			if sep+3 < len(f) {
				m.controllers = strings.Split(f[sep+3], ",") // superoptions: rw,cpu,cpuacct
			}
		default:
			continue
		}
		mounts = append(mounts, m)
	}
	return mounts
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// cgroupPaths reads /proc/self/cgroup, whose lines are "id:controllers:
// path", into a map from each controller to its path; the v2 hierarchy
// ("0::path") is under "".
func (r *Reader) cgroupPaths() map[string]string {
	b, err := os.ReadFile(r.root + "/proc/self/cgroup")
	if err != nil {
		return nil
	}
	paths := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	return paths
}
