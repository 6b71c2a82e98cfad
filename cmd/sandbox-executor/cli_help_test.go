package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// -h of every subcommand, and help, print the help on stdout and exit 0;
// a wrong use prints one line that says what is wrong, the usage and
// where the help is, on stderr, and exits 2.
func TestCLIHelp(t *testing.T) {
	for _, args := range [][]string{
		{"exec", "-h"}, {"logs", "-h"}, {"cp", "-h"}, {"tunnel", "-h"}, {"wait-port", "-h"}, {"install", "-h"}, {"mcp", "-h"}, {"exec", "--help"},
		{"shell", "-h"}, {"ps", "-h"}, {"start", "-h"}, {"kill", "-h"},
		{"help", "cp"}, {"cp", "-r", "-h"},
	} {
		r := runCLI(t, nil, nil, args...)
		assert.Equal(t, 0, r.code, "%q", args)
		assert.Empty(t, r.stderr, "%q", args)
		name := args[0]
		if name == "help" {
			name = args[1]
		}
		assert.True(t, strings.HasPrefix(r.stdout, "usage: sandbox-executor "+name+" "), "%q: %s", args, r.stdout)
		assert.Contains(t, r.stdout, "\nflags:\n", "%q", args)
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runCLI(t, nil, nil, args...)
		assert.Equal(t, 0, r.code, "%q", args)
		assert.Empty(t, r.stderr, "%q", args)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: sandbox-executor [flags]"), "%q: %s", args, r.stdout)
		assert.Contains(t, r.stdout, "-proxy-addr", "%q: the agent's flags", args)
	}
	r := runCLI(t, nil, nil, "version")
	assert.Equal(t, cliResult{0, "sandbox-executor " + version + "\n", ""}, r)

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cp", "a"}, "sandbox-executor cp: want SRC and DST, got 1 arguments; " +
			"usage: sandbox-executor cp [flags] SRC DST (see sandbox-executor cp -h)\n"},
		{[]string{"exec", "-nosuchflag"}, "sandbox-executor exec: flag provided but not defined: -nosuchflag; " +
			"usage: sandbox-executor exec [flags] [--] CMD [ARG...] (see sandbox-executor exec -h)\n"},
		{[]string{"logs", "-f=maybe", "x"}, "sandbox-executor logs: invalid boolean value \"maybe\" for -f: parse error; " +
			"usage: sandbox-executor logs [flags] ID (see sandbox-executor logs -h)\n"},
		{[]string{"help", "nosuch"}, "sandbox-executor help: no command \"nosuch\"\n" +
			"usage: sandbox-executor help [exec|shell|ps|start|kill|logs|cp|tunnel|wait-port|install|mcp]\n"},
	} {
		r := runCLI(t, nil, nil, tt.args...)
		assert.Equal(t, cliResult{2, "", tt.want}, r, "%q", tt.args)
	}
}
