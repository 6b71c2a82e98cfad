package contexts

import (
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sandbox-executor/sandbox-executor/executor"
)

// earlySize is how much of the stderr an interpreter writes before its
// worker is ready is kept, to say why a start failed.
const earlySize = 2 << 10

// interp is one running interpreter and its worker: the process group it
// leads, the frame pipes, and the readers of its stdout and stderr.
type interp struct {
	cmd    *exec.Cmd
	pid    int
	toW    *os.File   // frames to the worker (its fd 3)
	fromW  *os.File   // frames from the worker (its fd 4)
	frames chan frame // closed by readFrames at EOF or a malformed frame
	// badFrame is set, before frames closes, if a malformed frame ended it.
	badFrame error
	outs     [2]*os.File
	exited   chan struct{} // closed once cmd.Wait has returned and end is set
	readers  sync.WaitGroup
	limited  *executor.Limited
	end      executor.Result // how the interpreter ended; read only once exited is closed
	ready    atomic.Bool     // set once its worker's ready frame came

	// mu guards read: the bytes each output reader has delivered.
	// Holding it while a count grows and is waited for means the worker's
	// done frame, which says how many bytes it wrote, can wait for
	// exactly those bytes.
	mu   sync.Mutex
	read [2]int64
	// taken counts the bytes each reader has had from its pipe, counted
	// as soon as a read returns; consumed the same once handed on (or
	// held as the start of a cut character). See drained.
	taken, consumed [2]int64
	readsUp         chan struct{} // closed and replaced whenever read grows
	early           []byte        // the start of its stderr before ready, at most earlySize
}

// sink receives an interpreter's output, from its reader goroutines:
// stream 0 is stdout, 1 stderr; text is valid UTF-8.
type sink func(stream int, text string)

// startInterp starts the worker of spec with cfg, its output to out.
func (r *Registry) startInterp(spec language, cfg Config, out sink) (*interp, error) {
	path, err := r.lookPath(spec.binary)
	if err != nil {
		return nil, noInterpreterError(spec.binary)
	}
	cmd := exec.Command(path, spec.args...)
	cmd.Dir = cfg.Dir
	cmd.Env = r.env(cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: credential(cfg)}
	it := &interp{cmd: cmd, frames: make(chan frame, 16), exited: make(chan struct{}), readsUp: make(chan struct{})}
	var files []*os.File // the child's ends, closed once it has them
	defer func() { closeAll(files...) }()
	wR, toW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	fromW, wW, err := os.Pipe()
	if err != nil {
		closeAll(wR, toW)
		return nil, err
	}
	files = append(files, wR, wW)
	it.toW, it.fromW = toW, fromW
	for i := range it.outs {
		pr, pw, err := os.Pipe()
		if err != nil {
			it.closeFiles()
			return nil, err
		}
		it.outs[i] = pr
		files = append(files, pw)
	}
	cmd.Stdout, cmd.Stderr = files[2], files[3]
	cmd.ExtraFiles = []*os.File{wR, wW} // fds 3 and 4
	limited, err := r.runner.Limit(cmd, cfg.Limits)
	if err != nil {
		it.closeFiles()
		return nil, err
	}
	it.limited = limited
	err = r.startCmd(cmd)
	limited.Started()
	if err != nil {
		it.closeFiles()
		limited.Ended()
		return nil, fmt.Errorf("starting %s: %w", spec.binary, err)
	}
	it.pid = cmd.Process.Pid
	maxF := maxFrame(r.maxOutput())
	it.readers.Add(3)
	go it.readFrames(maxF)
	go it.readOutput(0, out)
	go it.readOutput(1, out)
	go it.wait(r)
	return it, nil
}

func (r *Registry) startCmd(cmd *exec.Cmd) error {
	if r.runner.Reaper != nil {
		return r.runner.Reaper.Start(cmd)
	}
	return cmd.Start()
}

// wait is the only caller of cmd.Wait. It runs in its own goroutine; it
// ends when the interpreter has exited. Its readers are then given a
// short while to read what is left, in case a process outside the group
// holds the pipes open.
func (it *interp) wait(r *Registry) {
	_ = it.cmd.Wait()
	if r.runner.Reaper != nil {
		r.runner.Reaper.Done(it.pid)
	}
	it.end = it.limited.Ended()
	close(it.exited)
	deadline := time.Now().Add(500 * time.Millisecond)
	_ = it.fromW.SetReadDeadline(deadline)
	for _, f := range it.outs {
		_ = f.SetReadDeadline(deadline)
	}
}

// readFrames runs in its own goroutine; it ends at EOF, a read error or
// a malformed frame, and then closes frames.
func (it *interp) readFrames(max int) {
	defer it.readers.Done()
	defer close(it.frames)
	for {
		f, err := readFrame(it.fromW, max)
		if err != nil {
			if errors.Is(err, errMalformed) {
				it.badFrame = err
			}
			return
		}
		it.frames <- f
	}
}

// readOutput reads stream i to its end and hands it to out as UTF-8
// text: invalid bytes become U+FFFD, and a character split between two
// reads is kept whole. It runs in its own goroutine; it ends at EOF or
// once the read deadline wait sets has passed.
func (it *interp) readOutput(i int, out sink) {
	defer it.readers.Done()
	buf := make([]byte, 64<<10)
	carry := 0
	for {
		n, err := it.outs[i].Read(buf[carry:])
		it.mu.Lock()
		it.taken[i] += int64(n)
		it.mu.Unlock()
		fresh := n
		n += carry
		whole := n
		if err == nil {
			whole = wholeRunes(buf[:n])
		}
		if whole > 0 {
			out(i, strings.ToValidUTF8(string(buf[:whole]), "\uFFFD"))
		}
		it.mu.Lock()
		if i == 1 && !it.ready.Load() {
			it.early = append(it.early, buf[:min(whole, earlySize-len(it.early))]...)
		}
		it.read[i] += int64(whole)
		it.consumed[i] += int64(fresh)
		close(it.readsUp)
		it.readsUp = make(chan struct{})
		it.mu.Unlock()
		carry = copy(buf, buf[whole:n])
		if err != nil {
			return
		}
	}
}

// wholeRunes returns the length of p without a UTF-8 sequence cut at its
// end; invalid bytes count as whole.
func wholeRunes(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return i
			}
			return len(p)
		}
	}
	return len(p)
}

// waitRead waits until the readers have delivered at least want bytes of
// each stream, the interpreter has exited, or d has passed. It reports
// whether all of them came.
func (it *interp) waitRead(want [2]int64, d time.Duration) bool {
	return it.waitReadAll(want, [2]int64{}, d)
}

// waitDrained is waitRead that also waits for the bytes written to the
// pipes around the worker's counted streams (the code's os.write(1, ...),
// a child process's output) that were in them when it was called: the
// end of a call must come after its output, however it was written.
func (it *interp) waitDrained(want [2]int64, d time.Duration) bool {
	var raw [2]int64
	it.mu.Lock()
	taken := it.taken
	it.mu.Unlock()
	for i := range raw {
		raw[i] = taken[i] + it.pending(i)
	}
	return it.waitReadAll(want, raw, d)
}

// pending returns the bytes waiting unread in stream i's pipe (FIONREAD, which Linux spells TIOCINQ).
func (it *interp) pending(i int) int64 {
	rc, err := it.outs[i].SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return int64(n)
}

// waitReadAll waits until the readers have delivered want bytes of each
// stream and consumed raw, the interpreter has exited, or d has passed.
func (it *interp) waitReadAll(want, raw [2]int64, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		it.mu.Lock()
		ok := it.read[0] >= want[0] && it.read[1] >= want[1] && it.consumed[0] >= raw[0] && it.consumed[1] >= raw[1]
		up := it.readsUp
		it.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-up:
		case <-timer.C:
			return false
		}
	}
}

// signal sends sig to the interpreter's process group.
func (it *interp) signal(sig syscall.Signal) {
	if err := syscall.Kill(-it.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = it.cmd.Process.Signal(sig)
	}
}

// kill kills the interpreter's process group and waits for it and its
// readers, then closes its pipes.
func (it *interp) kill() {
	it.signal(syscall.SIGKILL)
	<-it.exited
	// Nothing reads frames once the caller stops: drain them so that
	// readFrames can end.
	go drainFrames(it.frames)
	it.readers.Wait()
	it.closeFiles()
}

// drainFrames runs in its own goroutine; it ends when frames is closed,
// which readFrames does within the read deadline wait sets.
func drainFrames(frames <-chan frame) {
	for range frames {
	}
}

func (it *interp) closeFiles() {
	closeAll(it.toW, it.fromW, it.outs[0], it.outs[1])
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

func credential(cfg Config) *syscall.Credential {
	u := cfg.User
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// ownEnd waits up to d for the interpreter to exit, and reports how it
// ended and whether it did. The caller calls it only before the agent
// kills the interpreter, so that an end it reports is the interpreter's
// own (or a limit's), never the agent's SIGKILL.
func (it *interp) ownEnd(d time.Duration) (executor.Result, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-it.exited:
		return it.end, true
	case <-timer.C:
		return executor.Result{}, false
	}
}

// earlyError returns the last line the interpreter wrote to stderr before
// its worker was ready (a Python traceback's last line names the error),
// or "". Its readers must be done.
func (it *interp) earlyError() string {
	it.mu.Lock()
	defer it.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(string(it.early), "\uFFFD")), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
