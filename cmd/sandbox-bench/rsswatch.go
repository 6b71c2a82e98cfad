package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The figures that check a ceiling run the agent where it may have none:
// an rssWatch kills it before it takes the machine's memory.

// vmHWM returns the agent's peak RSS in MiB, or fallback if the agent
// has exited (killed at the safety cap).
func vmHWM(a *agent, fallback float64) float64 {
	kb, err := procStatus(a.pid, "VmHWM")
	if err != nil {
		return fallback
	}
	return max(float64(kb)/1024, fallback)
}

// safetyCap returns safetyCapMiB, or half the memory available now if
// that is less.
func safetyCap() float64 {
	return min(float64(safetyCapMiB), memAvailableMiB()/2)
}

// memAvailableMiB returns MemAvailable from /proc/meminfo, or twice
// safetyCapMiB if it cannot be read.
func memAvailableMiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 2 * safetyCapMiB
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					return kb / 1024
				}
			}
		}
	}
	return 2 * safetyCapMiB
}

// rssWatch samples an agent's VmRSS and kills the agent if it passes a
// cap. peak and killed are written by watch and read by stop after done
// is closed.
type rssWatch struct {
	a      *agent
	capMiB float64
	quit   chan struct{} // closed by stop
	done   chan struct{} // closed by watch when it returns
	once   sync.Once
	peak   float64
	killed bool
}

func startRSSWatch(a *agent, capMiB float64) *rssWatch {
	w := &rssWatch{a: a, capMiB: capMiB, quit: make(chan struct{}), done: make(chan struct{})}
	go w.watch()
	return w
}

// watch samples every rssWatchEvery.
//
// watch runs in its own goroutine, started by startRSSWatch; it ends when
// stop is called, when the agent exits, or once it has killed the agent.
func (w *rssWatch) watch() {
	defer close(w.done)
	t := time.NewTicker(rssWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-w.a.done:
			return
		case <-t.C:
		}
		rss := w.a.rssMiB()
		w.peak = max(w.peak, rss)
		if rss > w.capMiB {
			_ = w.a.cmd.Process.Kill()
			w.killed = true
			return
		}
	}
}

// stop ends the watch and returns the highest RSS seen and whether the
// agent was killed. It may be called more than once.
func (w *rssWatch) stop() (peakMiB float64, killed bool) {
	w.once.Do(func() { close(w.quit) })
	<-w.done
	return w.peak, w.killed
}
