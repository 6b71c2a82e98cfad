package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/sessions"
)

// newTestSessions returns a session registry for runner whose state files
// and temp workdirs go under the test's temp dir. The caller closes it:
// newTestServer, in the order of the agent's shutdown.
func newTestSessions(tb testing.TB, runner *executor.Runner) *sessions.Registry {
	tb.Helper()
	dir := tb.TempDir()
	// As /tmp is: users the sessions run as reach what is in it.
	require.NoError(tb, os.Chmod(dir, 0o711))
	require.NoError(tb, os.Chmod(filepath.Dir(dir), 0o711))
	reg, err := sessions.NewRegistry(runner, sessions.Options{StateDir: dir, WorkdirParent: dir})
	require.NoError(tb, err)
	return reg
}
