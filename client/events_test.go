package client

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMode(t *testing.T) {
	for _, m := range []fs.FileMode{0, 0o644, 0o755, 0o777, fs.ModeDir | 0o755, fs.ModeSymlink | 0o777,
		fs.ModeSetuid | fs.ModeSetgid | 0o755, fs.ModeDir | fs.ModeSticky | 0o777, fs.ModeNamedPipe | 0o600,
		fs.ModeDevice | fs.ModeCharDevice | 0o620, fs.ModeSocket | 0o700, fs.ModeIrregular} {
		assert.Equal(t, m, parseMode(m.String()), m.String())
	}
	for _, s := range []string{"", "rw-r--r--", "-rw-r--r-x-", "-rw-r--r-X", "Zrw-r--r--"} {
		assert.Zero(t, parseMode(s), s)
	}
}

// TestEventReader checks the stream-level rules: unknown events and
// comments are skipped, error events are errors, ids are line numbers,
// and an end without complete is a cut.
func TestEventReader(t *testing.T) {
	stream := ": ping\n\n" +
		"event: future\ndata: {\"anything\":[1]}\n\n" +
		"id: 7\nevent: log\ndata: {\"timestamp\":\"2026-01-02T03:04:05.123456789Z\",\"stream\":\"stderr\",\"data\":\"seven\"}\n\n" +
		"id: 8\nevent: log\ndata: {\"timestamp\":\"2026-01-02T03:04:05.123456789Z\",\"stream\":\"stdout\",\"data\":\"eight\"}\n\n" +
		"event: missed\ndata: {\"missed\":3,\"message\":\"3 log lines were dropped\"}\n\n" +
		"event: output\ndata: {\"stream\":\"stdout\",\"data\":\"out\"}\n\n" +
		"event: complete\ndata: {\"code\":3,\"error\":true,\"truncated\":true}\n\n"
	er := newEventReader(strings.NewReader(stream))
	next := func() (Event, error) {
		var ev Event
		err := er.next(&ev)
		return ev, err
	}
	ev, err := next()
	require.NoError(t, err)
	assert.Equal(t, EventLog, ev.Type)
	assert.Equal(t, uint64(7), ev.Seq)
	assert.Equal(t, Stderr, ev.Stream)
	assert.Equal(t, "seven", string(ev.Data))
	assert.Equal(t, "2026-01-02T03:04:05.123456789Z", ev.Time.Format("2006-01-02T15:04:05.999999999Z07:00"))
	ev2, err := next()
	require.NoError(t, err)
	assert.Equal(t, ev.Time, ev2.Time)
	assert.Equal(t, uint64(8), ev2.Seq)
	ev, err = next()
	require.NoError(t, err)
	assert.Equal(t, Event{Type: EventMissed, Missed: 3, Message: "3 log lines were dropped"}, ev)
	ev, err = next()
	require.NoError(t, err)
	assert.Equal(t, EventOutput, ev.Type)
	assert.Equal(t, "out", string(ev.Data))
	ev, err = next()
	require.NoError(t, err)
	assert.Equal(t, Event{Type: EventComplete, Code: 3, Truncated: true}, ev)
	_, err = next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "past complete, the stream's end is an end like any other")

	_, err = firstEvent("event: error\ndata: {\"error\":\"process not found: x\"}\n\n")
	var ae *Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 200, ae.StatusCode)
	assert.ErrorIs(t, err, ErrProcessNotFound)

	_, err = firstEvent("id: x\nevent: log\ndata: {}\n\n")
	assert.ErrorContains(t, err, "not a line number")
	_, err = firstEvent("event: output\ndata: {\"data\":1}\n\n")
	assert.ErrorContains(t, err, "malformed output event")
	var se *streamError
	_, err = firstEvent("event: output\ndata: {\"da")
	assert.True(t, errors.As(err, &se), "a cut inside an event")
}

// firstEvent reads the first event of stream.
func firstEvent(stream string) (Event, error) {
	var ev Event
	err := newEventReader(strings.NewReader(stream)).next(&ev)
	return ev, err
}

// seqStream returns the event stream /run_streaming sends for seq 1 n.
func seqStream(n int) []byte {
	var b []byte
	for i := 1; i <= n; i++ {
		b = append(b, "event: output\ndata: {\"stream\":\"stdout\",\"data\":\""...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, "\"}\n\n"...)
	}
	return append(b, "event: complete\ndata: {\"code\":0,\"error\":false}\n\n"...)
}

// BenchmarkEventReader measures the client alone on /run_streaming's
// events, from memory: one op is one event.
func BenchmarkEventReader(b *testing.B) {
	const n = 100_000
	data := seqStream(n)
	b.ReportAllocs()
	var ev Event
	for b.Loop() {
		er := newEventReader(bytes.NewReader(data))
		for i := 0; i < n; i++ {
			if err := er.next(&ev); err != nil {
				b.Fatal(err)
			}
		}
		if err := er.next(&ev); err != nil || ev.Type != EventComplete {
			b.Fatal(ev, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}
