package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const installDoc = `Copies this binary to DIR/sandbox-executor, mode 0755, replacing what is
there. It exists for images without a shell or cp, such as the agent's own:
a Kubernetes init container runs "sandbox-executor install /agent" to put
the agent into a volume that the workload's container then runs it from
(see deploy/kubernetes). DIR is created if missing.
`

// installName is the name install gives the copy.
const installName = "sandbox-executor"

// install runs "sandbox-executor install DIR".
func (c *cli) install(args []string) error {
	fs := c.flagSet("install", "DIR", installDoc)
	dirs, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(dirs) != 1 {
		return c.usageError(fs, "want one directory, got %d arguments", len(dirs))
	}
	dst, err := installSelf(dirs[0])
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, dst)
	return err
}

// installSelf copies the running executable into dir as installName, by
// way of a temporary file renamed over it: a copy that is running (an
// agent restarted with its volume kept) is replaced, never rewritten in
// place. It returns the copy's path.
func installSelf(dir string) (string, error) {
	src, err := os.Open("/proc/self/exe") // the binary even if its path has changed since it started
	if err != nil {
		return "", fmt.Errorf("opening this binary: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+installName+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("copying this binary into %s: %w", dir, err)
	}
	dst := filepath.Join(dir, installName)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}
