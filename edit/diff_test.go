package edit

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiffAppliesWithPatch: GNU patch, given our diff of a to b, makes b
// of a, for random edits (lines changed, added, removed, a missing final
// newline).
func TestDiffAppliesWithPatch(t *testing.T) {
	patchCmd, err := exec.LookPath("patch")
	if err != nil {
		t.Skip("patch is not on PATH")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for i := range 200 {
		var a []string
		for j := range rng.IntN(40) {
			a = append(a, []string{"x", "y", "z", "w"}[rng.IntN(4)]+strings.Repeat("!", j%3))
		}
		b := append([]string(nil), a...)
		for range rng.IntN(6) {
			k := rng.IntN(len(b) + 1)
			switch rng.IntN(3) {
			case 0:
				b = append(b[:k], append([]string{"new"}, b[k:]...)...)
			case 1:
				if k < len(b) {
					b = append(b[:k], b[k+1:]...)
				}
			case 2:
				if k < len(b) {
					b[k] = "changed"
				}
			}
		}
		as, bs := strings.Join(a, "\n"), strings.Join(b, "\n")
		if rng.IntN(2) == 0 && as != "" {
			as += "\n"
		}
		if rng.IntN(2) == 0 && bs != "" {
			bs += "\n"
		}
		d := unifiedDiff("a", "b", []byte(as), []byte(bs))
		if as == bs {
			assert.Empty(t, d)
			continue
		}
		orig, out, df := filepath.Join(dir, "orig"), filepath.Join(dir, "out"), filepath.Join(dir, "d.diff")
		require.NoError(t, os.WriteFile(orig, []byte(as), 0o644))
		require.NoError(t, os.WriteFile(df, []byte(d), 0o644))
		os.Remove(out)
		res, err := exec.Command(patchCmd, "-s", "-o", out, orig, df).CombinedOutput()
		require.NoError(t, err, "case %d: %s\n%s", i, res, d)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Equal(t, bs, string(got), "case %d:\n%s", i, d)
	}
}
