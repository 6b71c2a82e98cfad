package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	// healthTimeout bounds how long a started agent has to answer /health.
	healthTimeout = 5 * time.Second
	// healthPoll is the pause between /health attempts; it is also the
	// resolution of the start-up figure.
	healthPoll = 200 * time.Microsecond
	// stopTimeout is how long the agent has to exit after SIGTERM before
	// it is killed.
	stopTimeout = 6 * time.Second
	// logTail is how much of the agent's own log is kept for reports.
	logTail = 64 << 10
)

// agent is one sandbox-executor process started by the bench on free
// loopback ports. stop ends it; the zero agent is not usable.
type agent struct {
	cmd     *exec.Cmd
	pid     int
	apiAddr string // 127.0.0.1:PORT of the API
	base    string // "http://" + apiAddr
	proxy   string // 127.0.0.1:PORT of the TCP proxy
	secret  string
	// c is how the bench drives the agent, as a Go program would. hc is
	// c's transport, which the deliberately raw clients (request and
	// stream) share.
	c       *client.Client
	hc      *http.Client
	log     *tailBuffer
	healthy time.Duration // from just before exec to the first 200 from /health
	done    chan struct{} // closed by waitAgent once cmd.Wait has returned
}

// startAgent starts bin on two free loopback ports and waits until it
// answers /health; env is added to its environment. Picking a free port
// and handing it over is racy, so a failed start is retried twice.
func startAgent(ctx context.Context, bin string, env ...string) (*agent, error) {
	return startAgentArgs(ctx, bin, nil, env...)
}

// startAgentArgs is startAgent with args added to the agent's flags.
func startAgentArgs(ctx context.Context, bin string, args []string, env ...string) (*agent, error) {
	var err error
	for range 3 {
		var a *agent
		if a, err = tryStartAgent(ctx, bin, args, env); err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func tryStartAgent(ctx context.Context, bin string, args, env []string) (*agent, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	a := &agent{
		apiAddr: "127.0.0.1:" + strconv.Itoa(ports[0]),
		proxy:   "127.0.0.1:" + strconv.Itoa(ports[1]),
		secret:  randomSecret(),
		hc:      newHTTPClient(),
		log:     &tailBuffer{max: logTail},
		done:    make(chan struct{}),
	}
	a.base = "http://" + a.apiAddr
	if a.c, err = client.New(a.base, a.secret, client.WithHTTPClient(a.hc)); err != nil {
		return nil, err
	}
	a.cmd = exec.Command(bin, append([]string{"-addr", a.apiAddr, "-proxy-addr", a.proxy}, args...)...)
	a.cmd.Env = append(os.Environ(), "SANDBOX_SECRET="+a.secret, "SANDBOX_AUTH_MODE=static", "LOG_LEVEL=info")
	a.cmd.Env = append(a.cmd.Env, env...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	// The agent must not outlive the bench, even if the bench is killed.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	a.pid = a.cmd.Process.Pid
	go a.waitAgent()
	if err := a.waitHealthy(ctx); err != nil {
		a.stop()
		return nil, fmt.Errorf("%w; agent log: %s", err, a.log.String())
	}
	a.healthy = time.Since(start)
	return a, nil
}

// waitAgent is the only caller of cmd.Wait. It runs in its own goroutine;
// it ends when the agent process has exited and its log is copied.
func (a *agent) waitAgent() {
	_ = a.cmd.Wait()
	close(a.done)
}

// waitHealthy polls /health on fresh connections until it answers 200.
func (a *agent) waitHealthy(ctx context.Context) error {
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(healthTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-a.done:
			return errors.New("agent exited during start-up")
		default:
		}
		resp, err := probe.Get(a.base + "/health")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(healthPoll)
	}
	return errors.New("agent not healthy within " + healthTimeout.String())
}

// stop sends SIGTERM, waits for the agent to exit, and kills it if it has
// not within stopTimeout. It is safe to call twice.
func (a *agent) stop() {
	a.hc.CloseIdleConnections()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return
	case <-time.After(stopTimeout):
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

// newHTTPClient returns a keep-alive client with enough idle connections
// for every concurrent client of the bench, and no proxy or compression.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      64 << 10,
		WriteBufferSize:     64 << 10,
	}}
}

// request builds an authenticated request; body, if not nil, is JSON. It
// is for the clients that are raw on purpose (see stream), where the
// figure is the agent's alone; everything else goes through a.c.
func (a *agent) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// stream opens an event stream (POST with body, or GET) and returns the
// response after checking for 200, for the raw readers of the streaming
// figure: streamBody, which reads bytes without parsing, and streamSeq,
// which parses with the bench's own decoder (see decode.go).
func (a *agent) stream(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := a.request(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return resp, nil
}

// startProcess starts cmd in the background and returns its id.
func (a *agent) startProcess(ctx context.Context, cmd string) (string, error) {
	p, err := a.c.StartProcess(ctx, client.Command{Cmd: cmd})
	return p.ID, err
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "bench-" + hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written to it. exec's copying
// goroutine writes while reports read, so mu guards buf.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
