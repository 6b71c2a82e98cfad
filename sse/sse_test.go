package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
		"héllo wörld ✓ 𝄞", "\u2028\u2029", "<html>&amp;</html>",
		"bad \xff utf8 \xc3", "\xe2\x82", // truncated sequences
	}
	for _, in := range cases {
		got := AppendJSONString(nil, []byte(in))
		require.True(t, json.Valid(got), "invalid JSON for %q: %s", in, got)
		assert.NotContains(t, string(got), "\n")
		var back string
		require.NoError(t, json.Unmarshal(got, &back))
		want, err := json.Marshal(in) // encoding/json's view of the same bytes
		require.NoError(t, err)
		var wantBack string
		require.NoError(t, json.Unmarshal(want, &wantBack))
		assert.Equal(t, wantBack, back, "input %q", in)
		assert.True(t, utf8.ValidString(back))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add([]byte("hello\n\"x\"\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got := AppendJSONString(nil, in)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("invalid JSON %q for %q: %v", got, in, err)
		}
		want, _ := json.Marshal(string(in))
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("got %q, encoding/json %q", back, wantBack)
		}
	})
}

func TestWriterWireFormat(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "no", rec.Header().Get("X-Accel-Buffering"))
	assert.True(t, rec.Flushed)

	require.NoError(t, w.AppendEvent("", "output", []byte(`{"a":1}`)))
	require.NoError(t, w.AppendEventFunc(7, "log", func(b []byte) []byte { return append(b, `{"b":2}`...) }))
	assert.Empty(t, rec.Body.String(), "events are buffered until Flush")
	require.NoError(t, w.Flush())
	require.NoError(t, w.Event("complete", map[string]any{"code": 0, "error": false}))
	require.NoError(t, w.Comment("ping"))

	want := "event: output\ndata: {\"a\":1}\n\n" +
		"id: 7\nevent: log\ndata: {\"b\":2}\n\n" +
		"event: complete\ndata: {\"code\":0,\"error\":false}\n\n" +
		": ping\n\n"
	assert.Equal(t, want, rec.Body.String())
}

func TestWriterWritesLargeBatchesBeforeFlush(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	data := []byte(`"` + strings.Repeat("x", 1000) + `"`)
	for range 200 {
		require.NoError(t, w.AppendEvent("", "output", data))
	}
	assert.Less(t, w.Buffered(), flushThreshold, "the buffer never holds a whole large batch")
}

func TestReader(t *testing.T) {
	stream := ": ping\n\n" +
		"event: output\ndata: {\"a\":1}\n\n" +
		"id: 42\r\nevent: log\r\ndata: first\r\ndata: second\r\n\r\n" +
		"data:nospace\n\n" +
		"event: " + strings.Repeat("n", 100_000) + "\ndata: long\n\n" +
		"event: partial\ndata: x" // no blank line: discarded
	r := NewReader(strings.NewReader(stream))

	ev, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "output", string(ev.Name))
	assert.Equal(t, `{"a":1}`, string(ev.Data))
	assert.Nil(t, ev.ID)
	assert.Equal(t, 1, r.Comments)

	ev, err = r.Next()
	require.NoError(t, err)
	assert.Equal(t, "42", string(ev.ID))
	assert.Equal(t, "log", string(ev.Name))
	assert.Equal(t, "first\nsecond", string(ev.Data))

	ev, err = r.Next()
	require.NoError(t, err)
	assert.Equal(t, "", string(ev.Name))
	assert.Equal(t, "nospace", string(ev.Data))

	ev, err = r.Next()
	require.NoError(t, err)
	assert.Len(t, ev.Name, 100_000)

	_, err = r.Next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func BenchmarkAppendJSONString(b *testing.B) {
	line := []byte("2026-11-21T05:47:23Z INFO request served path=/run status=200 dur=1.2ms")
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		buf = AppendJSONString(buf[:0], line)
	}
}

func BenchmarkReader(b *testing.B) {
	var stream []byte
	for i := range 10000 {
		stream = AppendEvent(stream, "", "output", []byte(`{"stream":"stdout","data":"`+strconv.Itoa(i+1)+`"}`))
	}
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10000), "ns/event")
}

// Events and comments split across reads at every byte must parse the same
// as in one piece; comments alone must not make the buffer grow.
func TestReaderAcrossReadBoundaries(t *testing.T) {
	stream := ": ping\n\nid: 1\nevent: log\ndata: a\ndata: b\n\n: ping\nevent: x\n: inside\ndata: {\"k\":1}\n\n" +
		strings.Repeat(": keepalive\n\n", 10_000) + "event: end\ndata: {}\n\n"
	parse := func(r *Reader) ([]string, int) {
		var got []string
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				return got, r.Comments
			}
			require.NoError(t, err)
			got = append(got, fmt.Sprintf("%s|%s|%s|%v", ev.ID, ev.Name, ev.Data, ev.ID != nil))
		}
	}
	want, wantComments := parse(NewReader(strings.NewReader(stream)))
	assert.Equal(t, []string{"1|log|a\nb|true", "|x|{\"k\":1}|false", "|end|{}|false"}, want)
	assert.Equal(t, 10_003, wantComments)
	r := NewReader(iotest.OneByteReader(strings.NewReader(stream)))
	got, comments := parse(r)
	assert.Equal(t, want, got)
	assert.Equal(t, wantComments, comments)
	assert.Equal(t, 64<<10, len(r.buf), "comments alone do not grow the buffer")
}

func TestPingIfIdle(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	require.NoError(t, w.PingIfIdle(time.Hour))
	assert.Empty(t, rec.Body.String(), "a stream that just wrote is not idle")
	require.NoError(t, w.PingIfIdle(time.Nanosecond))
	assert.Equal(t, ": ping\n\n", rec.Body.String())
}
