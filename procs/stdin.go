package procs

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// WriteStdin copies src to p's stdin and returns how many bytes it wrote;
// see executor.Process.WriteStdin, whose errors it returns, except that
// once p has ended the error wraps ErrNotRunning and names p's status.
func (p *Process) WriteStdin(ctx context.Context, src io.Reader, stall time.Duration) (int64, error) {
	n, err := p.current().WriteStdin(ctx, src, stall)
	ended := errors.Is(err, executor.ErrFinished)
	if !ended && errors.Is(err, executor.ErrStdinClosed) {
		// Closed by the command (EPIPE), which may have exited, or be
		// dying of the SIGKILL that Kill sent: Kill records it under p.mu
		// before the kill can close the pipe, so this sees it, and the
		// wait below is for an end that is certain.
		select {
		case <-p.current().Done():
			ended = true
		default:
			p.mu.Lock()
			ended = p.sent&(1<<(syscall.SIGKILL-1)) != 0
			p.mu.Unlock()
		}
	}
	if ended {
		<-p.done // the command has ended: finish runs next, if it has not
		return n, notRunning(p.Info().Status)
	}
	return n, err
}

// CloseStdin closes p's stdin; see executor.Process.CloseStdin. It is
// idempotent, and does nothing once p has ended.
func (p *Process) CloseStdin() error {
	return p.current().CloseStdin()
}
