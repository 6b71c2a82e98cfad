package files

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContentLines(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		offset, limit int
		want          LineWindow
	}{
		{"all", "a\nb\nc\n", 1, -1, LineWindow{Data: []byte("a\nb\nc\n"), Total: 3}},
		{"middle", "a\nb\nc\n", 2, 1, LineWindow{Data: []byte("b\n"), Total: 3, More: true}},
		{"to the end", "a\nb\nc", 2, 5, LineWindow{Data: []byte("b\nc"), Total: 3}},
		{"no final newline counts", "a\nb", 1, 1, LineWindow{Data: []byte("a\n"), Total: 2, More: true}},
		{"crlf kept", "a\r\nb\r\n", 1, 1, LineWindow{Data: []byte("a\r\n"), Total: 2, More: true}},
		{"past the end", "a\n", 5, 2, LineWindow{Total: 1}},
		{"empty", "", 1, 10, LineWindow{Total: 0}},
		{"limit zero", "a\nb\n", 1, 0, LineWindow{Total: 2, More: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o644))
			c, err := Scan(t.Context(), p, nil)
			require.NoError(t, err)
			defer c.Close()
			got, err := c.Lines(t.Context(), tc.offset, tc.limit)
			require.NoError(t, err)
			assert.Equal(t, string(tc.want.Data), string(got.Data))
			assert.Equal(t, tc.want.Total, got.Total)
			assert.Equal(t, tc.want.More, got.More)
		})
	}
}

// A file bigger than one read buffer: lines cut across Copy's writes are
// counted once and kept whole.
func TestContentLinesAcrossChunks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	var data []byte
	for i := range 100_000 {
		data = append(data, []byte(filepath.Join("line", string(rune('a'+i%26))))...)
		data = append(data, '\n')
	}
	require.NoError(t, os.WriteFile(p, data, 0o644))
	c, err := Scan(t.Context(), p, nil)
	require.NoError(t, err)
	defer c.Close()
	got, err := c.Lines(t.Context(), 99_999, 10)
	require.NoError(t, err)
	assert.Equal(t, 100_000, got.Total)
	assert.Equal(t, "line/c\nline/d\n", string(got.Data), "lines 99,999 and 100,000: indexes 99,998 and 99,999, mod 26")
	assert.False(t, got.More)
}
