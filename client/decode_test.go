package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/sse"
)

// TestDecodeMatchesEncodingJSON decodes what the agent sends for tricky
// lines and compares each field with encoding/json's reading of it.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	lines := []string{
		"", "42", "plain text", `quote " and \ backslash`, "tab\tcr\rnl\n",
		"\x00\x01\x1f\x7f", "héllo wörld ✓ 𝄞", "\u2028\u2029", "<html>&amp;</html>",
		"bad \xff utf8 \xc3", "\xe2\x82", strings.Repeat("long ", 10_000),
	}
	var f eventData
	for _, line := range lines {
		data := []byte(`{"stream":"stderr","data":`) // as server/run.go writes it
		data = sse.AppendJSONString(data, []byte(line))
		data = append(data, '}')
		var want struct{ Stream, Data string }
		require.NoError(t, json.Unmarshal(data, &want), "data %q", data)
		require.NoError(t, f.decode(data), "data %q", data)
		assert.Equal(t, want.Stream, string(f.stream))
		assert.Equal(t, want.Data, string(f.data), "line %q", line)
	}
}

// TestDecodeEscapes covers escapes AppendJSONString never writes but JSON
// allows, keys in any order, and unknown keys of every type.
func TestDecodeEscapes(t *testing.T) {
	cases := []string{
		`{"data":"\/\b\f\n\r\t\"\\","stream":"stdout"}`,
		`{"data":"\u00e9\u4e2d\ud834\udd1e","stream":"stdout"}`,
		`{"data":"lone \ud834 high, lone \udd1e low","stream":"x"}`,
		`{"data":"\ud834\u0041","stream":"x"}`,
		` { "timestamp" : "2026-01-02T03:04:05.5Z" , "stream":"stdout", "data":"7", "extra":null, "ok":true } `,
		`{"data":"","stream":""}`,
		`{"new":{"a":[1,-2.5e3,{"b":"\u00e9"}],"c":{}},"data":"d","list":[],"f":0.5,"stream":"s"}`,
		`{"d\u0061ta":"escaped key","stream":"s"}`,
	}
	var f eventData
	for _, c := range cases {
		var want struct{ Stream, Data, Timestamp string }
		require.NoError(t, json.Unmarshal([]byte(c), &want), c)
		require.NoError(t, f.decode([]byte(c)), c)
		assert.Equal(t, want.Stream, string(f.stream), c)
		assert.Equal(t, want.Data, string(f.data), c)
		assert.Equal(t, want.Timestamp, string(f.timestamp), c)
	}
}

func TestDecodeOtherFields(t *testing.T) {
	var f eventData
	require.NoError(t, f.decode([]byte(`{"missed":123456,"message":"123456 log lines were dropped"}`)))
	assert.Equal(t, int64(123456), f.missed)
	assert.Equal(t, "123456 log lines were dropped", string(f.message))
	assert.Nil(t, f.data)

	require.NoError(t, f.decode([]byte(`{"code":-1,"error":true,"truncated":true,"message":"command timed out after 1s"}`)))
	assert.Equal(t, int64(-1), f.code)
	assert.True(t, f.truncated)
	assert.Nil(t, f.errText, "error is a boolean in complete")
	assert.Equal(t, int64(0), f.missed, "fields are reset between decodes")

	require.NoError(t, f.decode([]byte(`{"code":0,"error":false,"truncated":false}`)))
	assert.False(t, f.truncated)

	require.NoError(t, f.decode([]byte(`{"error":"failed to start command: \"x\""}`)))
	assert.Equal(t, `failed to start command: "x"`, string(f.errText))

	require.NoError(t, f.decode([]byte(`{}`)))
}

func TestDecodeRejectsInvalid(t *testing.T) {
	var f eventData
	for _, c := range []string{
		``, `{`, `{"data"}`, `{"data":"x"`, `{"data":"x",}`, `{"data":"x"} trailing`,
		`{"data":"unterminated}`, `{"data":"bad \q escape"}`, `{"data":"short \u12"}`,
		"{\"data\":\"raw\nnewline\"}", `{"missed":01}`, `{"missed":-}`, `{data:"x"}`, `{"ok":tru}`,
		`{"x":[1,]}`, `{"x":{"a"}}`, `{"x":01}`, `{"x":1.}`, `{"x":1e}`, `{"x":-}`, `{"x":[}`,
		`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		assert.Error(t, f.decode([]byte(c)), "%q", c)
	}
	// Valid JSON with the wrong type under a known key: refused rather
	// than misread.
	for _, c := range []string{`[]`, `"x"`, `{"data":{"nested":1}}`, `{"data":["x"]}`, `{"missed":1.5}`, `{"code":1e3}`, `{"message":null}`} {
		require.True(t, json.Valid([]byte(c)), "case %q is invalid JSON", c)
		assert.Error(t, f.decode([]byte(c)), "%q", c)
	}
}

func TestParseUint(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "1": 1, "1000000": 1_000_000, "1795241062346407618": 1795241062346407618} {
		got, ok := parseUint([]byte(in))
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1a", " 1", "12345678901234567890"} {
		_, ok := parseUint([]byte(in))
		assert.False(t, ok, in)
	}
}

func TestPlainBytesTable(t *testing.T) {
	require.Len(t, plainBytes, 256)
	for c := range 256 {
		want := c >= 0x20 && c != '"' && c != '\\'
		assert.Equal(t, want, plainBytes[c] == 1, "byte %#x", c)
	}
}

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
