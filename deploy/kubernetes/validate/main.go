// Command validate checks Kubernetes manifests offline, against the API's
// own Go types rather than JSON schemas that would have to be downloaded:
//
//	go run . [-agent-version V] FILE_OR_DIR...   (a directory: its *.yaml and *.yml files)
//
// Each YAML document is decoded strictly into the Go type of its
// apiVersion and kind (k8s.io/api), which fails on an unknown kind, an
// unknown or misplaced field (a typo such as readinessProbes, or a field
// at the wrong level), a value of the wrong type (a string where a number
// goes, an invalid quantity such as 2Gb), and a key given twice. Then the
// rules of the API server that the types do not carry, for what these
// manifests use: names, ports and their names, probes naming a declared
// port, resources, volume mounts of declared volumes, env values from one
// source. Last, this project's own rules for a container that runs the
// agent (see checker.agent), and with -agent-version, that every image
// named sandbox-executor has that tag. It prints one line per document and exits 1 if
// any failed.
//
// It is a module of its own, so that the agent's go.mod stays free of
// Kubernetes; it needs only the Go module proxy.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	var opts options
	flag.StringVar(&opts.agentVersion, "agent-version", "", "the `tag` every image named sandbox-executor must have")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: validate [-agent-version V] FILE_OR_DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	failed, err := run(flag.Args(), opts, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "validate:", err)
		os.Exit(2)
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// run validates every document of every manifest that args name, reports
// on out, and returns how many documents failed. Its error is for a path
// that cannot be read or names no manifest.
func run(args []string, opts options, out io.Writer) (failed int, err error) {
	files, err := manifestFiles(args)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return failed, err
		}
		results, err := validateFile(data, opts)
		if err != nil {
			fmt.Fprintf(out, "FAIL %s: %v\n", f, err)
			failed++
			continue
		}
		for _, r := range results {
			if len(r.problems) == 0 {
				fmt.Fprintf(out, "PASS %s: %s\n", f, r.name)
				continue
			}
			failed++
			fmt.Fprintf(out, "FAIL %s: %s:\n", f, r.name)
			for _, p := range r.problems {
				fmt.Fprintf(out, "    %s\n", p)
			}
		}
	}
	return failed, nil
}

// manifestFiles expands args: a file stands for itself, a directory for
// its *.yaml and *.yml files (not those of its subdirectories).
func manifestFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := len(files)
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") && !strings.HasPrefix(e.Name(), ".") {
				files = append(files, filepath.Join(a, e.Name()))
			}
		}
		if len(files) == n {
			return nil, fmt.Errorf("%s holds no *.yaml or *.yml file", a)
		}
	}
	return files, nil
}
