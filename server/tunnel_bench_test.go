package server

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

const tunnelBenchBytes = 64 << 20

// BenchmarkTunnelWSUp and BenchmarkTunnelWSDown move 64 MiB through a
// WebSocket tunnel, to a port that discards it and from one that sends
// it; cpu-ns/op counts client, agent and port alike.
func BenchmarkTunnelWSUp(b *testing.B) { benchTunnelWS(b, true) }

func BenchmarkTunnelWSDown(b *testing.B) { benchTunnelWS(b, false) }

func benchTunnelWS(b *testing.B, up bool) {
	ts, _ := newTestServer(b, testServer{runner: &executor.Runner{}})
	ln := testutil.Serve(b, func(c net.Conn) {
		if up {
			_, _ = io.Copy(io.Discard, c)
			return
		}
		buf := make([]byte, 1<<20)
		for sent := 0; sent < tunnelBenchBytes; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/tunnel_ws?port=" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	buf := make([]byte, 1<<20)
	b.SetBytes(tunnelBenchBytes)
	cpu0 := cpuTime()
	for b.Loop() {
		c, _, err := websocket.Dial(b.Context(), url, &websocket.DialOptions{Subprotocols: []string{wsProtocol},
			HTTPHeader: authed()})
		if err != nil {
			b.Fatal(err)
		}
		nc := websocket.NetConn(b.Context(), c, websocket.MessageBinary)
		if up {
			for sent := 0; sent < tunnelBenchBytes; sent += len(buf) {
				if _, err := nc.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
		} else if _, err := io.ReadFull(nc, make([]byte, tunnelBenchBytes)); err != nil {
			b.Fatal(err)
		}
		nc.Close()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
