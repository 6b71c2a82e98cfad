package server

import (
	"context"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
)

// mountTmpfs mounts a tmpfs of the given size (such as "1m") on a new
// temporary directory and returns it; it is unmounted when the test ends.
// The test is skipped where the process may not mount (not root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// newFilesTestServer is newTestServerWith for the file endpoints, with
// setup called on the Server before it serves anything: the place to
// replace its seams (freeSpace) and its logger without a data race.
func newFilesTestServer(t *testing.T, cfg Config, setup func(*Server)) (*httptest.Server, *Server) {
	t.Helper()
	auth, err := NewStaticAuth(testSecret)
	require.NoError(t, err)
	runner := &executor.Runner{}
	reg := procs.NewRegistry(runner, procs.Options{})
	fwd := &proxy.Forwarder{}
	s := New(zerolog.Nop(), auth, Deps{Runner: runner, Procs: reg, Forwarder: fwd}, cfg)
	if setup != nil {
		setup(s)
	}
	ts := httptest.NewUnstartedServer(openAPICheck(t, s.cfg.BasePath, s))
	ts.Listener = s.Listener(ts.Config, ts.Listener)
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, reg.Close(ctx))
		require.NoError(t, fwd.Close(ctx))
	})
	return ts, s
}
