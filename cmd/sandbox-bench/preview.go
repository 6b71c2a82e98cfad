package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	previewClients = 16
	previewWindow  = time.Second // per alternation
	previewRounds  = 3
	sseSamples     = 40
	sseGap         = 10 * time.Millisecond // between the stream's start and its event
)

// httpAppArg, as the first argument, makes the bench a small HTTP app in a
// process of its own, the app behind the preview proxy: sandbox-bench
// httpapp LISTEN. GET / answers a short text; GET /sse opens an event
// stream and, sseGap later, sends one event whose data is the time it was
// written (Unix nanoseconds), then ends.
const httpAppArg = "httpapp"

func httpAppMain(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: sandbox-bench httpapp LISTEN")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello from the app\n")
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		time.Sleep(sseGap)
		_, _ = fmt.Fprintf(w, "data: %d\n\n", time.Now().UnixNano())
		_ = rc.Flush()
		time.Sleep(sseGap)
	})
	return http.ListenAndServe(args[0], mux)
}

// sectionPreview measures the HTTP preview proxy, the last part of
// figure 14: see previewFigures.
func (b *bench) sectionPreview(ctx context.Context) error {
	a, err := b.sharedAgent(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sectionTimeout)
	defer cancel()
	return b.previewFigures(ctx, a)
}

// previewFigures measures the preview proxy against the app direct: the
// requests per second of previewClients keep-alive clients, and how long
// after the app writes an event it reaches the client. The requests are
// net/http's, the same client both ways: the point is the proxy, and the
// app's replies are not the agent's API.
func (b *bench) previewFigures(ctx context.Context, a *agent) error {
	app, err := startChild(ctx, httpAppArg)
	if err != nil {
		return err
	}
	defer app.stop()
	_, port, _ := net.SplitHostPort(app.addr)
	directURL := "http://" + app.addr
	proxiedURL := a.base + "/proxy/" + port
	// The bare relay process of figure 6, in front of the app: what a
	// proxy that does nothing per request but move its bytes reaches.
	rel, err := startRelay(ctx, app.addr)
	if err != nil {
		return err
	}
	defer rel.stop()
	var direct, proxied, relayed hammerRun
	appPID := app.cmd.Process.Pid
	for range previewRounds {
		if err := direct.add(ctx, a, appPID, 0, directURL+"/", false); err != nil {
			return fmt.Errorf("app direct: %w", err)
		}
		if err := proxied.add(ctx, a, appPID, a.pid, proxiedURL+"/", true); err != nil {
			return fmt.Errorf("preview proxy: %w", err)
		}
		if err := relayed.add(ctx, a, appPID, rel.cmd.Process.Pid, "http://"+rel.addr+"/", false); err != nil {
			return fmt.Errorf("app behind the relay: %w", err)
		}
	}
	b.rep.add(newFigure("14 tunnels", "preview proxy, 16 clients of a small app", proxied.rate(), "req/s").
		withRef(direct.rate(), "the app direct, same clients").ratioAtLeast(0.5).
		withNote("keep-alive net/http clients, %d windows of %s each way, alternating; CPU per request, clients/app/agent: %s direct, %s proxied; the bare TCP relay process of figure 6 in front of the app, which parses no HTTP: %.3f× of the app direct (CPU %s, the relay's last)",
			previewRounds, previewWindow, direct.cpuPerRequest(), proxied.cpuPerRequest(),
			relayed.rate()/direct.rate(), relayed.cpuPerRequest()))

	var dLat, pLat []time.Duration
	for range sseSamples {
		d, err := sseDelay(ctx, a, directURL+"/sse", false)
		if err != nil {
			return fmt.Errorf("event stream direct: %w", err)
		}
		p, err := sseDelay(ctx, a, proxiedURL+"/sse", true)
		if err != nil {
			return fmt.Errorf("event stream through the proxy: %w", err)
		}
		dLat, pLat = append(dLat, d), append(pLat, p)
	}
	pMed := median(pLat)
	b.rep.add(newFigure("14 tunnels", "preview proxy, an event's delay after the app wrote it, median", ms(pMed), "ms").
		withRef(ms(median(dLat)), "the app direct").withTarget("≤ 2 ms", pMed <= 2*time.Millisecond).
		withNote("%d streams each way; p90 %.2f ms through the proxy, %.2f ms direct", sseSamples,
			ms(percentile(pLat, 90)), ms(percentile(dLat, 90))))
	return nil
}

// hammerRun sums the windows of one kind of hammer: the replies, the
// time, and the CPU time of the bench's clients, the app and the proxy
// between them, if any.
type hammerRun struct {
	n                   int64
	wall                time.Duration
	clients, app, proxy time.Duration
}

// add runs one window of hammer on url and adds it to r; proxyPID is the
// process between the clients and the app, or 0.
func (r *hammerRun) add(ctx context.Context, a *agent, appPID, proxyPID int, url string, auth bool) error {
	cpu := func(pid int) time.Duration {
		if pid == 0 {
			return 0
		}
		return pidCPU(pid)
	}
	self0, app0, proxy0 := selfCPU(), cpu(appPID), cpu(proxyPID)
	n, d, err := hammer(ctx, a, url, auth)
	if err != nil {
		return err
	}
	r.n, r.wall = r.n+n, r.wall+d
	r.clients += selfCPU() - self0
	r.app += cpu(appPID) - app0
	r.proxy += cpu(proxyPID) - proxy0
	return nil
}

func (r *hammerRun) rate() float64 { return float64(r.n) / r.wall.Seconds() }

// cpuPerRequest is the CPU each process spent per reply, as "30/15/0 µs":
// clients, app, proxy.
func (r *hammerRun) cpuPerRequest() string {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(r.n, 1)) }
	return fmt.Sprintf("%.0f/%.0f/%.0f µs", per(r.clients), per(r.app), per(r.proxy))
}

// hammer sends GET url from previewClients goroutines for previewWindow
// and returns how many replies came back, and the time taken.
func hammer(ctx context.Context, a *agent, url string, auth bool) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, previewWindow)
	defer cancel()
	var count atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, previewClients) // one slot per worker, so none can block
	start := time.Now()
	for range previewClients {
		wg.Add(1)
		go hammerWorker(ctx, &wg, a, url, auth, &count, errc)
	}
	wg.Wait()
	d := time.Since(start)
	select {
	case err := <-errc:
		return 0, 0, err
	default:
	}
	return count.Load(), d, nil
}

// hammerWorker sends GET url in a loop until ctx ends, counting the 200s.
//
// hammerWorker runs in its own goroutine, previewClients per window; it
// ends when ctx ends or a request fails (reported on errc). wg is
// hammer's.
func hammerWorker(ctx context.Context, wg *sync.WaitGroup, a *agent, url string, auth bool, count *atomic.Int64, errc chan<- error) {
	defer wg.Done()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+a.secret)
		}
		resp, err := a.hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				errc <- err
			}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errc <- fmt.Errorf("GET %s: %s", url, resp.Status)
			return
		}
		count.Add(1)
	}
}

// sseDelay opens the app's event stream at url and returns how long after
// the app wrote its event the event was read here.
func sseDelay(ctx context.Context, a *agent, url string, auth bool) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+a.secret)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	got := time.Now()
	if err != nil {
		return 0, err
	}
	stamp, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "data:")), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("event %q: %w", line, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return got.Sub(time.Unix(0, stamp)), nil
}
