package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/sandbox-executor/sandbox-executor/client"
)

// localTerminal is the terminal exec -t runs in: its stdin to put in raw
// mode, its stdout to take the size from.
type localTerminal struct {
	in, out int // file descriptors
}

// localTerminal returns the terminal of exec -t, or nil if tty is false or
// standard input and output are not both terminals (then the command
// still gets a terminal of the agent's, 80×24, and nothing here changes).
func (c *cli) localTerminal(tty bool) *localTerminal {
	if !tty {
		return nil
	}
	in, ok1 := c.stdin.(*os.File)
	out, ok2 := c.stdout.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		return nil
	}
	return &localTerminal{in: int(in.Fd()), out: int(out.Fd())}
}

// size returns the terminal's columns and rows, or zeros (the agent's
// default) if it cannot be read.
func (t *localTerminal) size() (cols, rows int) {
	cols, rows, err := term.GetSize(t.out)
	if err != nil || cols < 1 || rows < 1 || cols > 1000 || rows > 1000 {
		return 0, 0
	}
	return cols, rows
}

// makeRaw puts the terminal in raw mode: keys, Ctrl-C included, go to the
// remote program as typed. It returns the function that restores it.
func (t *localTerminal) makeRaw() (restore func(), err error) {
	old, err := term.MakeRaw(t.in)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { _ = term.Restore(t.in, old) }) }, nil
}

// followSize sends the terminal's size to x at every SIGWINCH, until the
// function it returns is called, which waits for followWindow to end.
func (t *localTerminal) followSize(ctx context.Context, x *client.ExecConn) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go t.followWindow(ctx, &wg, x, winch, done)
	return func() {
		signal.Stop(winch)
		close(done)
		wg.Wait()
	}
}

// followWindow runs in its own goroutine, owned by followSize's stop; it
// ends when done is closed.
func (t *localTerminal) followWindow(ctx context.Context, wg *sync.WaitGroup, x *client.ExecConn, winch <-chan os.Signal, done <-chan struct{}) {
	defer wg.Done()
	ctx = context.WithoutCancel(ctx)
	for {
		select {
		case <-done:
			return
		case <-winch:
			if cols, rows := t.size(); cols > 0 {
				_ = x.Resize(ctx, cols, rows)
			}
		}
	}
}
