package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	client  *http.Client
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
		client:  newClient(),
		log:     &tailBuffer{max: logTail},
		done:    make(chan struct{}),
	}
	a.base = "http://" + a.apiAddr
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
	a.client.CloseIdleConnections()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return
	case <-time.After(stopTimeout):
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

// newClient returns a keep-alive client with enough idle connections for
// every concurrent client of the bench, and no proxy or compression.
func newClient() *http.Client {
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

// request builds an authenticated request; body, if not nil, is JSON.
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

// call sends a request with a JSON body (nil for none), checks for a 2xx
// status and decodes the reply into out, if out is not nil.
func (a *agent) call(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := a.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// stream opens an event stream (POST with body, or GET) and returns the
// response after checking for 200.
func (a *agent) stream(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := a.request(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
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

// runReply is the reply of /run.
type runReply struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Error  string `json:"error"`
	Code   int    `json:"code"`
}

// run calls /run with a prepared body such as {"cmd":"true"}.
func (a *agent) run(ctx context.Context, body []byte) (runReply, error) {
	var r runReply
	err := a.call(ctx, http.MethodPost, "/run", body, &r)
	return r, err
}

// startProcess calls /start_process and returns the process id.
func (a *agent) startProcess(ctx context.Context, cmd string) (string, error) {
	body, _ := json.Marshal(map[string]string{"cmd": cmd})
	var r struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/start_process", body, &r); err != nil {
		return "", err
	}
	if r.ID == "" {
		return "", errors.New("start_process: no id in the reply")
	}
	return r.ID, nil
}

// processInfo is one entry of /list_processes.
type processInfo struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	StartedAt   string `json:"started_at"`
	CompletedAt string `json:"completed_at"`
}

// listProcesses calls /list_processes and returns the processes by id.
func (a *agent) listProcesses(ctx context.Context) (map[string]processInfo, error) {
	var r struct {
		Processes []processInfo `json:"processes"`
	}
	if err := a.call(ctx, http.MethodGet, "/list_processes", nil, &r); err != nil {
		return nil, err
	}
	m := make(map[string]processInfo, len(r.Processes))
	for _, p := range r.Processes {
		m[p.ID] = p
	}
	return m, nil
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
