package sessions

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trickyValues are values that each shell quotes its own way in export -p.
var trickyValues = map[string]string{
	"T_EMPTY":     "",
	"T_QUOTE":     "it's",
	"T_QUOTES":    `'a' "b" ''`,
	"T_NEWLINES":  "line 1\nline 2\n\nline 4\n",
	"T_NL_EXPORT": "x\nexport FAKE='1'\n@pwd\n/etc\n@end\n",
	"T_SPECIAL":   "a\\b$c`d\"e $(echo no) ${HOME} ! * ? [x] ~ # ; & | < >",
	"T_CONTROL":   "tab\there\x01\x1b[0m\r\x7f",
	"T_UNICODE":   "ünïcødé ✓ 日本",
	"T_SPACES":    "  lead and trail  ",
	"T_EQUALS":    "a=b=c",
	"T_BACKSLASH": `\`,
	"T_INVALID":   "\xff\xfe",
}

// shells are the shells whose export -p parseState reads, with the
// arguments that make them print it their way.
func shells(t *testing.T) map[string][]string {
	all := map[string][]string{
		"dash":          {"dash"},
		"bash":          {"bash"},
		"bash --posix":  {"bash", "--posix"},
		"busybox ash":   {"busybox", "sh"},
		"/bin/sh (sut)": {"/bin/sh"},
	}
	for name, argv := range all {
		if _, err := exec.LookPath(argv[0]); err != nil {
			t.Logf("%s not installed: not checked", name)
			delete(all, name)
		}
	}
	return all
}

// TestParseStateShells runs the wrapper in each shell with values that
// need quoting in its environment, a variable exported without a value
// and one unset, and checks that the state parsed is exactly the
// environment the shell had.
func TestParseStateShells(t *testing.T) {
	dir := t.TempDir()
	cwd := filepath.Join(dir, "odd 'dir'\nname")
	require.NoError(t, os.Mkdir(cwd, 0o755))
	sourced := filepath.Join(dir, "env.sh")
	require.NoError(t, os.WriteFile(sourced, []byte("export SOURCED=yes; unset S\n"), 0o644))
	for name, argv := range shells(t) {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(dir, strings.NewReplacer(" ", "_", "/", "_").Replace(name)+".state")
			require.NoError(t, os.WriteFile(state, nil, 0o600))
			env := []string{"PATH=" + os.Getenv("PATH"), "GONE=1"}
			for k, v := range trickyValues {
				env = append(env, k+"="+v)
			}
			cmd := exec.Command(argv[0], append(argv[1:], "-c", wrap(`cd "$D"; unset GONE D; export NOVALUE; source "$S"; exit 3`, state, sourceUnknown))...)
			cmd.Env = append(env, "D="+cwd, "S="+sourced)
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 3, exit.ExitCode(), "the exit status is kept")

			b, err := os.ReadFile(state)
			require.NoError(t, err)
			gotCwd, gotEnv, ok := parseState(b)
			require.True(t, ok, "state:\n%s", b)
			assert.Equal(t, cwd, gotCwd)
			got := map[string]string{}
			for _, kv := range gotEnv {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			for k, v := range trickyValues {
				assert.Equal(t, v, got[k], "%s, state:\n%s", k, b)
			}
			assert.Equal(t, "yes", got["SOURCED"])
			assert.NotContains(t, got, "S")
			assert.NotContains(t, got, "GONE")
			assert.NotContains(t, got, "NOVALUE")
			assert.NotContains(t, got, "SHLVL")
			assert.NotContains(t, got, "FAKE")
			assert.Equal(t, cwd, got["PWD"])
		})
	}
}

func TestParseStateRejects(t *testing.T) {
	for name, text := range map[string]string{
		"empty":             "",
		"no end":            "export A='1'\n@pwd\n/tmp\n",
		"cut in a value":    "export A='1\n",
		"cut after pwd":     "export A='1'\n@pwd\n/tm",
		"relative pwd":      "export A='1'\n@pwd\ntmp\n@end\n",
		"no pwd":            "export A='1'\n@pwd\n\n@end\n",
		"garbage":           "hello\n@pwd\n/tmp\n@end\n",
		"bad name":          "export A-B='1'\n@pwd\n/tmp\n@end\n",
		"open double quote": "export A=\"x\n@pwd\n/tmp\n@end\n",
		"text after value":  "export A='1' B\n@pwd\n/tmp\n@end\n",
	} {
		_, _, ok := parseState([]byte(text))
		assert.False(t, ok, name)
	}
}

func TestParseStateFormats(t *testing.T) {
	text := "declare -x A=$'it\\'s\\n\\t\\001\\x41\\u00e9\\cA'\n" +
		"declare -rx R=\"ro\"\n" +
		"declare -ax ARR\n" +
		"declare -x N\n" +
		"export B=plain\\ word\n" +
		"export C=\"a\\\nb\"\n" +
		"export _='/usr/bin/env'\n" +
		"@pwd\n/a b\n@end\n"
	cwd, env, ok := parseState([]byte(text))
	require.True(t, ok)
	assert.Equal(t, "/a b", cwd)
	slices.Sort(env)
	assert.Equal(t, []string{"A=it's\n\t\x01Aé\x01", "B=plain word", "C=ab", "R=ro"}, env)
}

// The Registry asks the shell once whether it has source; the prefix then
// defines it only where it is missing, and source works either way.
func TestSourceSupport(t *testing.T) {
	r, _ := newTestRegistry(t)
	want := sourceBuiltin
	if err := exec.Command("/bin/sh", "-c", "command -v source").Run(); err != nil {
		want = sourceMissing
	}
	assert.Equal(t, want, r.source())
	dir := t.TempDir()
	sourced := filepath.Join(dir, "env.sh")
	require.NoError(t, os.WriteFile(sourced, []byte("export SOURCED=yes\n"), 0o644))
	for name, argv := range shells(t) {
		for _, kind := range []sourceSupport{sourceUnknown, sourceBuiltin, sourceMissing} {
			has := exec.Command(argv[0], append(argv[1:], "-c", "command -v source")...).Run() == nil
			if (kind == sourceBuiltin && !has) || (kind == sourceMissing && has) {
				continue // the Registry would not choose it for this shell
			}
			state := filepath.Join(dir, "state")
			require.NoError(t, os.WriteFile(state, nil, 0o600))
			out, err := exec.Command(argv[0], append(argv[1:], "-c", wrap("source "+sourced+"; echo $SOURCED", state, kind))...).CombinedOutput()
			require.NoError(t, err, "%s, %d: %s", name, kind, out)
			assert.Equal(t, "yes\n", string(out), "%s, %d", name, kind)
		}
	}
}
