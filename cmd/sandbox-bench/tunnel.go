package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const (
	tunnelBulkBytes   = 512 << 20 // per bulk transfer
	tunnelBulkRepeats = 3
	tunnelRoundTrips  = 5000
)

// sectionTunnel measures figure 14: CONNECT and WebSocket tunnels to a
// sink/echo server in a process of its own, against the bare io.Copy
// relay process of figure 6 to the same server. The HTTP preview proxy,
// also figure 14, is a section of its own (preview.go).
func (b *bench) sectionTunnel(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	s, err := startChild(ctx, sinkArg)
	if err != nil {
		return err
	}
	defer s.stop()
	relay, err := startRelay(ctx, s.addr)
	if err != nil {
		return err
	}
	defer relay.stop()
	_, portText, _ := net.SplitHostPort(s.addr)
	var port int
	fmt.Sscan(portText, &port)
	cl := a.c
	dialRelay := func(ctx context.Context) (net.Conn, error) { return dial(ctx, relay.addr) }
	dialConnect := func(ctx context.Context) (net.Conn, error) { return cl.DialTunnel(ctx, port, client.DialOptions{}) }
	dialWS := func(ctx context.Context) (net.Conn, error) {
		return cl.DialTunnel(ctx, port, client.DialOptions{WebSocket: true})
	}

	// The kinds alternate, so that the machine's drift hits all alike.
	kinds := []func(context.Context) (net.Conn, error){dialRelay, dialConnect, dialWS}
	up, down := make([][]float64, len(kinds)), make([][]float64, len(kinds))
	for range tunnelBulkRepeats {
		for i, dial := range kinds {
			d, err := countedBulk(ctx, dial)
			if err != nil {
				return fmt.Errorf("bulk up: %w", err)
			}
			up[i] = append(up[i], tunnelBulkBytes/d.Seconds()/(1<<30))
			if d, err = sourcedBulk(ctx, dial); err != nil {
				return fmt.Errorf("bulk down: %w", err)
			}
			down[i] = append(down[i], tunnelBulkBytes/d.Seconds()/(1<<30))
		}
	}
	const relayRef = "the bare io.Copy relay process to the same server"
	for _, dir := range []struct {
		name string
		v    [][]float64
	}{{"to the port", up}, {"from the port", down}} {
		relayMed, connectMed, wsMed := medianFloat(dir.v[0]), medianFloat(dir.v[1]), medianFloat(dir.v[2])
		b.rep.add(newFigure("14 tunnels", "CONNECT tunnel, bulk 512 MiB "+dir.name, connectMed, "GiB/s").
			withRef(relayMed, relayRef).ratioAtLeast(0.95).
			withNote("median of %d, alternating with the relay and the WebSocket tunnel", tunnelBulkRepeats))
		b.rep.add(newFigure("14 tunnels", "WebSocket tunnel, bulk 512 MiB "+dir.name, wsMed, "GiB/s").
			withRef(connectMed, "the CONNECT tunnel").ratioAtLeast(0.6).
			withNote("binary messages; the client's WebSocket (internal/wsclient: one write(2) per 128 KiB frame) in this process, the agent's coder/websocket"))
	}

	conns := make([]net.Conn, 2)
	for i, d := range []func(context.Context) (net.Conn, error){dialRelay, dialConnect} {
		if conns[i], err = d(ctx); err != nil {
			return err
		}
		defer conns[i].Close()
	}
	lats, err := roundTripsOn(ctx, conns, tunnelRoundTrips)
	if err != nil {
		return err
	}
	rLat, cLat := lats[0], lats[1]
	b.rep.add(newFigure("14 tunnels", "CONNECT tunnel, 5,000 round trips of 64 B, median", us(median(cLat)), "µs").
		withRef(us(median(rLat)), "the bare relay process").ratioAtMost(1.15).
		withNote("mean/p99 %.1f/%.1f µs tunnelled, %.1f/%.1f µs relayed; alternating on one connection each",
			us(mean(cLat)), us(percentile(cLat, 99)), us(mean(rLat)), us(percentile(rLat, 99))))
	return nil
}

// countedBulk sends tunnelBulkBytes to the sink in modeCount through the
// connection dial opens and waits for its count: no half-close needed.
func countedBulk(ctx context.Context, dial func(context.Context) (net.Conn, error)) (time.Duration, error) {
	start := time.Now()
	c, err := dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	chunk := make([]byte, bulkChunk)
	var hdr [9]byte
	hdr[0] = modeCount
	binary.BigEndian.PutUint64(hdr[1:], tunnelBulkBytes)
	if _, err := c.Write(hdr[:]); err != nil {
		return 0, err
	}
	for sent := 0; sent < tunnelBulkBytes; sent += bulkChunk {
		if _, err := c.Write(chunk); err != nil {
			return 0, err
		}
	}
	var reply [8]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return 0, fmt.Errorf("reading the sink's count: %w", err)
	}
	if n := binary.BigEndian.Uint64(reply[:]); n != tunnelBulkBytes {
		return 0, fmt.Errorf("sink counted %d bytes, want %d", n, tunnelBulkBytes)
	}
	return time.Since(start), nil
}

// sourcedBulk asks the server in modeSource for tunnelBulkBytes through the
// connection dial opens and reads them to the end.
func sourcedBulk(ctx context.Context, dial func(context.Context) (net.Conn, error)) (time.Duration, error) {
	start := time.Now()
	c, err := dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	var hdr [9]byte
	hdr[0] = modeSource
	binary.BigEndian.PutUint64(hdr[1:], tunnelBulkBytes)
	if _, err := c.Write(hdr[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, bulkChunk)
	var n int64
	for n < tunnelBulkBytes {
		m, err := c.Read(buf)
		n += int64(m)
		if err != nil {
			return 0, fmt.Errorf("after %d bytes: %w", n, err)
		}
	}
	return time.Since(start), nil
}

// roundTripsOn makes count exchanges of roundTripSize bytes with the echo
// over each of conns, taking them in turn in a rotating order, and
// returns each one's latencies.
func roundTripsOn(ctx context.Context, conns []net.Conn, count int) ([][]time.Duration, error) {
	for _, c := range conns {
		_ = c.SetDeadline(time.Now().Add(connTimeout))
		if _, err := c.Write([]byte{modeEcho}); err != nil {
			return nil, err
		}
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), roundTripSize/16)
	got := make([]byte, len(msg))
	lats := make([][]time.Duration, len(conns))
	for i := 0; i < count && ctx.Err() == nil; i++ {
		msg[0] = byte(i)
		for j := range conns {
			k := (i + j) % len(conns)
			t0 := time.Now()
			if _, err := conns[k].Write(msg); err != nil {
				return nil, err
			}
			if _, err := io.ReadFull(conns[k], got); err != nil {
				return nil, err
			}
			lats[k] = append(lats[k], time.Since(t0))
			if !bytes.Equal(msg, got) {
				return nil, fmt.Errorf("round trip %d: echo differs", i)
			}
		}
	}
	if len(lats[0]) < count {
		return nil, fmt.Errorf("round trips: out of time")
	}
	return lats, nil
}
