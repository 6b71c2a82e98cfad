package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

const (
	bulkBytes      = 1 << 30 // figure 6: bytes per bulk transfer
	bulkChunk      = 1 << 20
	bulkRepeats    = 3
	roundTripCount = 10_000
	roundTripSize  = 64
	echoConns      = 1000
	echoSize       = 64 << 10
	connTimeout    = 60 * time.Second
)

// sectionProxy measures figure 6: the TCP proxy bound to a sink/echo
// server in a process of its own, against direct loopback connections to
// that process. It is long because its three figures share one agent
// binding and one relay reference, set up and torn down in order here.
func (b *bench) sectionProxy(ctx context.Context) error {
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
	_, portText, _ := net.SplitHostPort(s.addr)
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	if _, err := a.c.BindPort(ctx, port); err != nil {
		return err
	}
	defer func() { _ = a.c.UnbindPort(context.WithoutCancel(ctx)) }()

	relay, err := startRelay(ctx, s.addr)
	if err != nil {
		return err
	}
	defer relay.stop()

	var viaProxy, direct, viaRelay []float64
	var wall, agentCPU, benchCPU time.Duration
	for range bulkRepeats {
		cpu0, self0 := a.cpuTime(), selfCPU()
		d, err := bulk(ctx, a.proxy)
		if err != nil {
			return fmt.Errorf("bulk through the proxy: %w", err)
		}
		wall, agentCPU, benchCPU = wall+d, agentCPU+a.cpuTime()-cpu0, benchCPU+selfCPU()-self0
		viaProxy = append(viaProxy, bulkBytes/d.Seconds()/(1<<30))
		if d, err = bulk(ctx, s.addr); err != nil {
			return fmt.Errorf("bulk direct: %w", err)
		}
		direct = append(direct, bulkBytes/d.Seconds()/(1<<30))
		if d, err = bulk(ctx, relay.addr); err != nil {
			return fmt.Errorf("bulk through the relay: %w", err)
		}
		viaRelay = append(viaRelay, bulkBytes/d.Seconds()/(1<<30))
	}
	directMed := medianFloat(direct)
	const directRef = "direct loopback to the same sink process"
	b.rep.add(newFigure("6 TCP proxy", "bulk 1 GiB throughput", medianFloat(viaProxy), "GiB/s").
		withRef(directMed, directRef).ratioAtLeast(0.85).
		withNote("median of %d transfers each way; while proxied: wall %.0f ms, agent CPU %.0f ms, bench CPU %.0f ms (of %.0f ms the %d CPUs had)",
			bulkRepeats, ms(wall), ms(agentCPU), ms(benchCPU), ms(wall)*float64(runtime.NumCPU()), runtime.NumCPU()))
	b.rep.add(newFigure("6 TCP proxy", "bulk 1 GiB, minimal splice relay process", medianFloat(viaRelay), "GiB/s").
		withRef(directMed, directRef).withNote("this program re-executed as a 40-line io.Copy relay: the floor for any proxy process here"))

	inProc, err := startSink("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer inProc.close()
	// The four kinds of round trip alternate, one each in turn and in a
	// rotating order, so that the machine's drift between fast and slow
	// periods hits all alike.
	lats, err := roundTrips(ctx, a.proxy, s.addr, relay.addr, inProc.addr())
	if err != nil {
		return err
	}
	pLat, dLat, rLat, iLat := lats[0], lats[1], lats[2], lats[3]
	// Block medians first: median and percentile sort in place.
	pBlocks, dBlocks, rBlocks := blockMedians(pLat, 5), blockMedians(dLat, 5), blockMedians(rLat, 5)
	b.rep.add(newFigure("6 TCP proxy", "10,000 round trips of 64 B, median", us(median(pLat)), "µs").
		withRef(us(median(dLat)), "direct to the same echo process").ratioAtMost(2.0).
		withNote("mean/p99 %.1f/%.1f µs proxied, %.1f/%.1f µs direct; medians of each 2,000 in turn: proxied %s, direct %s",
			us(mean(pLat)), us(percentile(pLat, 99)), us(mean(dLat)), us(percentile(dLat, 99)),
			pBlocks, dBlocks))
	b.rep.add(newFigure("6 TCP proxy", "10,000 round trips of 64 B, against the relay process", us(median(pLat)), "µs").
		withRef(us(median(rLat)), "minimal splice relay process").ratioAtMost(1.15).
		withNote("the proxy copies with internal/relay, as the CONNECT tunnel does; the relay process is the floor for any proxy process here"))
	b.rep.add(newFigure("6 TCP proxy", "10,000 round trips, minimal splice relay process", us(median(rLat)), "µs").
		withRef(us(median(dLat)), "direct").
		withNote("mean/p99 %.1f/%.1f µs, medians of each 2,000 %s; a proxied round trip crosses processes four times, a direct one twice",
			us(mean(rLat)), us(percentile(rLat, 99)), rBlocks))
	b.rep.add(newFigure("6 TCP proxy", "10,000 round trips, client and echo in one process", us(median(iLat)), "µs").
		withRef(us(median(dLat)), "direct").
		withNote("no process boundary: the Go scheduler hands each message over without the kernel waking another process"))

	pTime, pErrs := manyEchoes(ctx, a.proxy)
	dTime, _ := manyEchoes(ctx, s.addr)
	f := newFigure("6 TCP proxy", "1,000 concurrent 64 KiB echoes intact", float64(echoConns-pErrs.count()), "connections").
		withTarget("1000 of 1000", pErrs.count() == 0).
		withNote("all done in %.0f ms proxied, %.0f ms direct", ms(pTime), ms(dTime))
	if pErrs.count() > 0 {
		f = f.withNote("%s; %.0f ms proxied, %.0f ms direct", pErrs.String(), ms(pTime), ms(dTime))
	}
	b.rep.add(f)
	return nil
}

// blockMedians returns the medians, in µs, of n consecutive blocks of
// lat, which must be in the order measured (call it before sorting lat).
func blockMedians(lat []time.Duration, n int) string {
	out := ""
	for i := range n {
		block := slices.Clone(lat[i*len(lat)/n : (i+1)*len(lat)/n])
		out += fmt.Sprintf("%s%.0f", map[bool]string{true: "", false: "/"}[i == 0], us(median(block)))
	}
	return out
}

// bulk sends bulkBytes to the sink at addr and waits for its count.
func bulk(ctx context.Context, addr string) (time.Duration, error) {
	start := time.Now()
	c, err := dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	chunk := make([]byte, bulkChunk)
	chunk[0] = modeSink
	if _, err := c.Write(chunk[:1]); err != nil {
		return 0, err
	}
	for sent := 0; sent < bulkBytes; sent += bulkChunk {
		if _, err := c.Write(chunk); err != nil {
			return 0, err
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, err
	}
	var reply [8]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return 0, fmt.Errorf("reading the sink's count: %w", err)
	}
	if n := binary.BigEndian.Uint64(reply[:]); n != bulkBytes {
		return 0, fmt.Errorf("sink counted %d bytes, want %d", n, bulkBytes)
	}
	return time.Since(start), nil
}

// roundTrips makes roundTripCount request/response exchanges of
// roundTripSize bytes with the echo at each of addrs, over one connection
// each, taking the addresses in turn, and returns each one's latencies in
// the order measured.
func roundTrips(ctx context.Context, addrs ...string) ([][]time.Duration, error) {
	conns := make([]net.Conn, len(addrs))
	for i, addr := range addrs {
		c, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(connTimeout))
		if _, err := c.Write([]byte{modeEcho}); err != nil {
			return nil, err
		}
		conns[i] = c
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), roundTripSize/16)
	got := make([]byte, len(msg))
	lats := make([][]time.Duration, len(addrs))
	for i := 0; i < roundTripCount && ctx.Err() == nil; i++ {
		msg[0] = byte(i)
		for j := range conns {
			// Each pass starts one further along, so that no kind always
			// follows the same other kind: a round trip is faster right
			// after one that woke the same echo process.
			k := (i + j) % len(conns)
			c := conns[k]
			t0 := time.Now()
			if _, err := c.Write(msg); err != nil {
				return nil, fmt.Errorf("round trip to %s: %w", addrs[k], err)
			}
			if _, err := io.ReadFull(c, got); err != nil {
				return nil, fmt.Errorf("round trip to %s: %w", addrs[k], err)
			}
			lats[k] = append(lats[k], time.Since(t0))
			if !bytes.Equal(msg, got) {
				return nil, fmt.Errorf("round trip %d to %s: echo differs", i, addrs[k])
			}
		}
	}
	if len(lats[0]) < roundTripCount {
		return nil, errors.New("round trips: out of time")
	}
	return lats, nil
}

// manyEchoes opens echoConns connections to addr at once; each sends
// echoSize bytes of its own pattern and must get them back intact.
func manyEchoes(ctx context.Context, addr string) (time.Duration, *errorList) {
	pattern := make([]byte, echoSize+256)
	for i := range pattern {
		pattern[i] = byte(i*7 + i/251)
	}
	errs := &errorList{}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range echoConns {
		wg.Add(1)
		go echoOne(ctx, &wg, addr, pattern[i%256:i%256+echoSize], errs)
	}
	wg.Wait()
	return time.Since(start), errs
}

// echoOne sends data through one echo connection while reading it back,
// and checks what came back.
//
// echoOne runs in its own goroutine, one per connection; it ends when the
// echo has ended, failed or timed out. wg is its owner's count.
func echoOne(ctx context.Context, wg *sync.WaitGroup, addr string, data []byte, errs *errorList) {
	defer wg.Done()
	c, err := dial(ctx, addr)
	if err != nil {
		errs.add("dial: %v", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	errc := make(chan error, 1) // one slot, so sendAll never blocks on it
	go sendAll(errc, c.(*net.TCPConn), data)
	got, err := io.ReadAll(c)
	if werr := <-errc; err == nil {
		err = werr
	}
	switch {
	case err != nil:
		errs.add("%v", err)
	case !bytes.Equal(got, data):
		errs.add("echo of %d bytes came back as %d different bytes", len(data), len(got))
	}
}

// sendAll writes the echo mode byte and data to c, then half-closes it.
//
// sendAll runs in its own goroutine, one per echo connection; it ends
// when everything is written or the write fails, and reports on errc.
func sendAll(errc chan<- error, c *net.TCPConn, data []byte) {
	_, err := c.Write([]byte{modeEcho})
	if err == nil {
		_, err = c.Write(data)
	}
	if err == nil {
		err = c.CloseWrite()
	}
	errc <- err
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}
