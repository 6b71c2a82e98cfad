package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// relayArg, as the first argument, makes the bench a minimal TCP relay:
// sandbox-bench relay LISTEN TARGET. The bench starts itself that way, the
// way os/exec's tests re-execute the test binary as a helper, to measure
// what any proxy in a process of its own costs on this machine: the floor
// under figure 6's proxied figures.
const relayArg = "relay"

// relayMain forwards every connection accepted on listen to target, both
// ways, with io.Copy between *net.TCPConn values (splice(2) on Linux, as
// in proxy/proxy.go). It runs until it is killed.
func relayMain(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: sandbox-bench relay LISTEN TARGET")
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go relayConn(c.(*net.TCPConn), args[1])
	}
}

// relayConn dials target and copies both ways until both directions end.
//
// relayConn runs in its own goroutine, one per connection; it ends when
// both copies have ended. The relay process is killed rather than shut
// down, so nothing waits for it.
func relayConn(c *net.TCPConn, target string) {
	defer c.Close()
	b, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	errc := make(chan error, 2) // one slot per copier, so neither can leak
	go relayCopy(errc, b.(*net.TCPConn), c)
	go relayCopy(errc, c, b.(*net.TCPConn))
	<-errc
	<-errc
}

// relayCopy copies src to dst and half-closes dst.
//
// relayCopy runs in its own goroutine, two per connection; it ends at
// src's EOF or on an error, and reports on errc.
func relayCopy(errc chan<- error, dst, src *net.TCPConn) {
	_, err := io.Copy(dst, src)
	_ = dst.CloseWrite()
	errc <- err
}

// childProc is this program re-executed as a helper process: a relay or a
// sink server listening on addr. stop kills it.
type childProc struct {
	cmd  *exec.Cmd
	addr string
}

// startRelay starts this program as a relay to target on a free port and
// waits until it accepts connections.
func startRelay(ctx context.Context, target string) (*childProc, error) {
	return startChild(ctx, relayArg, target)
}

// startChild starts this program with arg, a free loopback address and
// rest as its arguments, and waits until that address accepts
// connections.
func startChild(ctx context.Context, arg string, rest ...string) (*childProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p := &childProc{addr: "127.0.0.1:" + strconv.Itoa(ports[0])}
	p.cmd = exec.Command(self, append([]string{arg, p.addr}, rest...)...)
	p.cmd.Stderr = os.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		// A probe connection that sends nothing: a sink server ends it
		// when it reads no mode byte, and a relay passes it on to one.
		if c, err := net.Dial("tcp", p.addr); err == nil {
			c.Close()
			return p, nil
		}
		time.Sleep(time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s on %s did not start", arg, p.addr)
}

func (p *childProc) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}
