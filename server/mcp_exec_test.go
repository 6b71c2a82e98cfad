package server

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/procs"
)

// procsExec is ExecFuncs over today's background processes, standing in
// for /run's yield_ms and /poll_process until they land: real processes,
// real output, lines as the cursor.
func procsExec(reg *procs.Registry) ExecFuncs {
	read := func(ctx context.Context, p *procs.Process, after int64, yield time.Duration) ExecState {
		select {
		case <-p.Done():
		case <-time.After(yield):
		case <-ctx.Done():
		}
		sub := p.Subscribe(uint64(after))
		defer sub.Close()
		st := ExecState{ProcessID: p.ID, Cursor: after}
		var out bytes.Buffer
		for {
			lines, _, _ := sub.Read(make([]procs.Line, 0, 256))
			if len(lines) == 0 {
				break
			}
			for _, l := range lines {
				out.Write(l.Data)
				out.WriteByte('\n')
				st.Cursor = int64(l.Seq)
			}
		}
		info := p.Info()
		st.Output, st.Running, st.ExitCode = out.Bytes(), info.Status == procs.StatusRunning, info.ExitCode
		return st
	}
	return ExecFuncs{
		Start: func(ctx context.Context, c ExecStart) (ExecState, error) {
			p, err := reg.Start(executor.Command{Cmd: c.Cmd, Dir: c.Cwd, Env: c.Env})
			if err != nil {
				return ExecState{}, err
			}
			return read(ctx, p, 0, c.Yield), nil
		},
		Poll: func(ctx context.Context, q ExecPoll) (ExecState, error) {
			p, err := reg.Get(q.ProcessID)
			if err != nil {
				return ExecState{}, err
			}
			return read(ctx, p, *q.Cursor, q.Yield), nil
		},
	}
}

// exec and exec_poll, once wired: the Go SDK's client checks every
// structuredContent against the declared outputSchema.
func TestMCPExecTools(t *testing.T) {
	ts, _ := newTestServer(t, testServer{setup: func(s *Server) {
		fns := procsExec(s.procs)
		s.exec = &fns
		s.mcp = s.newMCP()
	}})
	cs := connectSDK(t, ts.URL, "")

	res := callSDK(t, cs, "exec", map[string]any{"cmd": "echo hi"})
	require.False(t, res.IsError, textOf(res))
	got := structured(t, res)
	assert.Equal(t, "exited", got["status"])
	assert.EqualValues(t, 0, got["exit_code"])
	assert.Equal(t, "hi\n", got["output"])

	res = callSDK(t, cs, "exec", map[string]any{"cmd": "echo out; exit 3"})
	assert.True(t, res.IsError, "a non-zero exit is an error result")
	assert.EqualValues(t, 3, structured(t, res)["exit_code"])

	res = callSDK(t, cs, "exec", map[string]any{"cmd": "sleep 1; echo done", "yield_ms": 50})
	got = structured(t, res)
	require.Equal(t, "running", got["status"], textOf(res))
	id := got["process_id"].(string)
	require.Eventually(t, func() bool {
		got = structured(t, callSDK(t, cs, "exec_poll", map[string]any{"process_id": id, "cursor": 0, "yield_ms": 500}))
		return got["status"] == "exited"
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "done\n", got["output"])

	res = callSDK(t, cs, "exec", map[string]any{"cmd": "seq 1 5000", "max_output_bytes": 1000})
	got = structured(t, res)
	assert.Equal(t, true, got["truncated"])
	assert.LessOrEqual(t, len(got["output"].(string)), 1001)
	assert.True(t, strings.HasPrefix(got["output"].(string), "1\n2\n"))
	assert.True(t, strings.HasSuffix(got["output"].(string), "4999\n5000\n"))
	id = got["process_id"].(string)
	assert.Regexp(t, `\[output truncated: \d+ bytes omitted; read it with process_logs \{"process_id": "`+id+`"\}\]$`, textOf(res))
	logs := structured(t, callSDK(t, cs, "process_logs", map[string]any{"process_id": id, "max_output_bytes": 1 << 20}))
	var all strings.Builder
	for i := 1; i <= 5000; i++ {
		all.WriteString(strconv.Itoa(i) + "\n")
	}
	assert.Equal(t, all.String(), logs["output"], "the whole output is readable by process_logs")
}
