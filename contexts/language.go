package contexts

import (
	_ "embed"
)

//go:embed worker.py
var workerPy string

//go:embed worker.js
var workerJS string

// language is how one language's worker is started.
type language struct {
	name   string
	binary string   // looked up on PATH
	args   []string // after the binary
}

// languages returns the language called name.
func languages(name string) (language, bool) {
	switch name {
	case "python":
		// -u is not what makes output unbuffered (the worker's own
		// sys.stdout is); -I is not used, so that PYTHONPATH and the
		// user's site-packages work as in a shell.
		return language{name: name, binary: "python3", args: []string{"-c", workerPy}}, true
	case "javascript":
		return language{name: name, binary: "node", args: []string{"-e", workerJS}}, true
	}
	return language{}, false
}
