package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// The log formats of -log-format.
const (
	logJSON    = "json"    // one JSON object a line, for log collectors
	logConsole = "console" // aligned, coloured on a terminal, for a person
)

// logTimeFormat is RFC 3339 to the millisecond, always three digits so
// that lines align. zerolog's own timestamp would take its format from a
// package variable, which the agent does not set.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// newLogger returns the agent's logger, writing to w at level in format
// (logJSON or logConsole). Every line has a "time" in UTC, to the
// millisecond.
func newLogger(w io.Writer, level zerolog.Level, format string) zerolog.Logger {
	if format == logConsole {
		w = zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(level).Hook(timestampHook{})
}

// timestampHook adds the time to every line that is written.
type timestampHook struct{}

func (timestampHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format(logTimeFormat))
}

// isTerminal reports whether w is a terminal, where console lines get
// colours.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// signalCause is the cause of the context notifySignals returns when a
// signal ended it, so that the shutdown line can name the signal.
type signalCause struct{ sig os.Signal }

func (c signalCause) Error() string { return signalName(c.sig) + " received" }

// signalName returns a signal's name, such as "SIGTERM".
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}

// notifySignals is signal.NotifyContext whose context's cause, when one of
// sigs ends it, is a signalCause. Calling stop ends the relay.
//
// Its goroutine ends when the context does: at the first of sigs, or at
// stop.
func notifySignals(parent context.Context, sigs ...os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c := make(chan os.Signal, 1)
	signal.Notify(c, sigs...)
	go func() {
		select {
		case sig := <-c:
			cancel(signalCause{sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(c)
		cancel(nil)
	}
}

// shutdownSignal returns the name of the signal that ended ctx, or "" if
// none did.
func shutdownSignal(ctx context.Context) string {
	if c, ok := context.Cause(ctx).(signalCause); ok {
		return signalName(c.sig)
	}
	return ""
}
