package search

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchTree makes a tree of source-like files, about mb megabytes, with
// a literal on one line of every 50th file.
func benchTree(b *testing.B, mb int) string {
	b.Helper()
	root := b.TempDir()
	line := "\tif err := doSomething(ctx, value, other); err != nil { return fmt.Errorf(\"wrap: %w\", err) }\n"
	body := strings.Repeat(line, 32<<10/len(line)) // 32 KiB
	n := mb << 20 / len(body)
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("pkg%02d", i%64))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		content := body
		if i%50 == 0 {
			content = body[:len(body)/2] + "needle_literal_here\n" + body[len(body)/2:]
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.go", i)), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkGrepLiteral greps a literal in a 64 MB tree with each engine,
// and with grep -rF and rg themselves for comparison (same files).
func BenchmarkGrepLiteral(b *testing.B) {
	root := benchTree(b, 64)
	req := GrepRequest{Pattern: "needle_literal_here", Fixed: true, Path: root, MaxResults: 100_000}
	b.Run("go", func(b *testing.B) { benchGrep(b, New(""), req) })
	if rg := LookRG(); rg != "" {
		b.Run("rg-engine", func(b *testing.B) { benchGrep(b, New(rg), req) })
		b.Run("rg-itself", func(b *testing.B) { benchCmd(b, rg, "-F", "--no-config", "-c", "needle_literal_here", root) })
	}
	b.Run("grep-rF", func(b *testing.B) { benchCmd(b, "grep", "-rFc", "needle_literal_here", root) })
}

func benchGrep(b *testing.B, s *Searcher, req GrepRequest) {
	b.SetBytes(64 << 20)
	for b.Loop() {
		rep, err := s.Grep(b.Context(), req)
		if err != nil || len(rep.Matches) == 0 {
			b.Fatal(err, len(rep.Matches))
		}
	}
}

func benchCmd(b *testing.B, name string, args ...string) {
	b.SetBytes(64 << 20)
	for b.Loop() {
		if err := exec.Command(name, args...).Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkGrepRegex greps a regular expression in the same tree.
func BenchmarkGrepRegex(b *testing.B) {
	root := benchTree(b, 64)
	req := GrepRequest{Pattern: `needle_\w+_here|wrapped: \d+`, Path: root, MaxResults: 100_000}
	b.Run("go", func(b *testing.B) { benchGrep(b, New(""), req) })
	if rg := LookRG(); rg != "" {
		b.Run("rg-engine", func(b *testing.B) { benchGrep(b, New(rg), req) })
		b.Run("rg-itself", func(b *testing.B) { benchCmd(b, rg, "--no-config", "-c", req.Pattern, root) })
	}
	b.Run("grep-rE", func(b *testing.B) { benchCmd(b, "grep", "-rEc", req.Pattern, root) })
}

// BenchmarkFindGo finds the .go files of the same tree.
func BenchmarkFindGo(b *testing.B) {
	root := benchTree(b, 64)
	s := New("")
	for b.Loop() {
		if _, err := s.FindFiles(b.Context(), FindRequest{Path: root, Glob: "**/*.go", MaxResults: 100_000}); err != nil {
			b.Fatal(err)
		}
	}
}

// findTree makes the shape of sandbox-bench's search tree for find_files:
// n empty .go files, 64 to a directory (find does not read them).
func findTree(b *testing.B, n int) string {
	b.Helper()
	root := b.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("pkg%03d", i/64))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.go", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkFindFiles finds the .go files of a 12,800-file tree, and
// find -name '*.go' does the same for comparison: the issue asks for at
// least 0.8× find's speed.
func BenchmarkFindFiles(b *testing.B) {
	root := findTree(b, 12_800)
	s := New("")
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			rep, err := s.FindFiles(b.Context(), FindRequest{Path: root, Glob: "**/*.go", MaxResults: 100_000})
			if err != nil || len(rep.Entries) != 12_800 {
				b.Fatal(err)
			}
		}
	})
	b.Run("find", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("find", root, "-name", "*.go").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
