package testutil

import (
	"path/filepath"
	"testing"
)

// Leftovers returns the temporary files and directories that the files
// package's uploads and extractions create in dir (".NAME.upload-*",
// ".NAME.extract-*"): after an upload or extraction has ended, none may
// remain.
func Leftovers(tb testing.TB, dir string) []string {
	tb.Helper()
	var found []string
	for _, pattern := range []string{".*.upload-*", ".*.extract-*", ".extract-*"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			tb.Fatal(err)
		}
		found = append(found, m...)
	}
	return found
}
