package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parsedEvent is an Event copied out of the Reader's buffer.
type parsedEvent struct{ id, name, data string }

// readAll parses every event of r, and the error that ends the stream.
func readAll(r io.Reader) ([]parsedEvent, error) {
	sr := NewReader(r)
	var events []parsedEvent
	for {
		ev, err := sr.Next()
		if err != nil {
			return events, err
		}
		events = append(events, parsedEvent{string(ev.ID), string(ev.Name), string(ev.Data)})
	}
}

// FuzzReader checks that whatever bytes a stream holds, the Reader does
// not panic, parses the same events however the bytes are split into
// reads, and that an event it returns, written again with AppendEvent
// (when its fields fit on one line each), parses back to itself.
func FuzzReader(f *testing.F) {
	for _, seed := range []string{
		"", "\n", "event: log\ndata: {}\n\n", "id: 7\nevent: log\ndata: {\"a\":1}\n\n: ping\n\n",
		"data: a\ndata: b\n\n", "data:x\r\n\r\n", "event: x\n", ": c\n\n: d\n", "id\nevent\ndata\n\n",
		"retry: 5\nfoo: bar\ndata:  two spaces\n\n", "\r\n\r\n\r\n", "data: \xff\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		events, err := readAll(bytes.NewReader(stream))
		require.Error(t, err)
		assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
		assert.LessOrEqual(t, len(events), len(stream)/2+1)

		split, splitErr := readAll(iotest.OneByteReader(bytes.NewReader(stream)))
		assert.Equal(t, events, split, "one byte at a time")
		assert.Equal(t, err, splitErr)

		for _, ev := range events {
			if strings.ContainsAny(ev.id+ev.name+ev.data, "\r\n") {
				continue // several data lines, or a field AppendEvent would write differently
			}
			again, err := readAll(bytes.NewReader(AppendEvent(nil, ev.id, ev.name, []byte(ev.data))))
			require.ErrorIs(t, err, io.EOF)
			assert.Equal(t, []parsedEvent{ev}, again)
		}
	})
}
