package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentProcess is the agent run as a process of its own, by execAgent.
type agentProcess struct {
	cmd  *exec.Cmd
	addr string        // the API's host:port
	logs chan struct{} // closed once the agent's stderr is drained
}

// execAgent runs the test binary as the agent, on loopback ports, with
// the test's environment, env and SANDBOX_SECRET (unless env sets it), and
// args after the address flags, until the test ends. The agent is
// exec'd by sh -c prefix+`exec "$0" "$@"`, so that prefix can set its
// limits; its pid is the shell's.
func execAgent(t *testing.T, prefix string, env []string, args ...string) *agentProcess {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("/bin/sh", append([]string{"-c", prefix + `exec "$0" "$@"`,
		exe, "-addr", "127.0.0.1:0", "-proxy-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), agentEnv+"=1", "SANDBOX_SECRET="+testSecret, "LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...) // exec keeps the last of duplicate keys
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	a := &agentProcess{cmd: cmd, logs: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() { // drains the agent's stderr; it ends when the agent exits
		defer close(a.logs)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Message, API string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "listening" {
				addrc <- line.API
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }() // ends when the agent does; killed below if it must
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not exit within 10 s of SIGTERM")
			_ = cmd.Process.Kill()
			<-done
		}
		<-a.logs
	})
	select {
	case a.addr = <-addrc:
	case <-a.logs:
		t.Fatal("the agent exited before listening")
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not listen within 10 s")
	}
	return a
}

// startLimitedAgent runs the test binary as the agent, with a limit of
// nofile open files that it cannot raise, until the test ends.
func startLimitedAgent(t *testing.T, nofile int) *agentProcess {
	t.Helper()
	// ulimit -n sets the hard limit too, so Go cannot raise the soft one.
	a := execAgent(t, `ulimit -n `+strconv.Itoa(nofile)+` && `, nil)
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(a.cmd.Process.Pid) + "/limits")
	require.NoError(t, err)
	require.Regexp(t, `Max open files\s+`+strconv.Itoa(nofile)+`\s`, string(limits))
	return a
}

// Connections without the token that declared a body and sent
// one byte of it were held for ever; 1,100 of them exhausted a 1,024-fd
// limit and the owner's /run timed out until the attacker let go. Here a
// 128-fd agent gets three times that many such connections, half of them
// with headers never finished, and the owner's /run must still succeed.
func TestUnauthenticatedClientsCannotLockTheOwnerOut(t *testing.T) {
	const nofile = 128
	a := startLimitedAgent(t, nofile)
	var attackers []net.Conn
	defer func() {
		for _, c := range attackers {
			c.Close()
		}
	}()
	for i := range 3 * nofile {
		c, err := net.DialTimeout("tcp", a.addr, 5*time.Second)
		if err != nil {
			continue // a full backlog refuses some: the attack holds as well
		}
		attackers = append(attackers, c)
		req := "POST /run HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
		if i%2 == 1 {
			req = "POST /run HTTP/1.1\r\nHost: x\r\n"
		}
		_, _ = io.WriteString(c, req)
	}
	require.NotEmpty(t, attackers)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		req, err := http.NewRequest(http.MethodPost, "http://"+a.addr+"/run", strings.NewReader(`{"cmd":"echo hi"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testSecret)
		resp, err := client.Do(req)
		require.NoError(t, err, "the owner is locked out")
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, out)
		assert.Equal(t, "hi\n", out["stdout"])
	}
}
