package files

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanFile writes data to a new file, scans it and returns the Content
// and what Copy sends.
func scanFile(t *testing.T, data []byte) (*Content, []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	c, err := Scan(t.Context(), p, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	var out bytes.Buffer
	require.NoError(t, c.Copy(t.Context(), &out))
	return c, out.Bytes()
}

// Scan decides UTF-8 over the whole file, whatever sequence the end of
// its buffer cuts.
func TestScanUTF8AcrossChunks(t *testing.T) {
	var cases [][]byte
	for _, r := range []string{"é", "€", "😀"} {
		for shift := range 5 {
			pre := bytes.Repeat([]byte("a"), 2*chunk-shift) // the second buffer ends at 2*chunk
			cases = append(cases,
				append(append(pre, r...), "bcd"...),                   // whole sequence across the edge
				append(append(clone(pre), r[:len(r)-1]...), "bcd"...), // cut sequence, then ASCII
				append(clone(pre), r[:len(r)-1]...),                   // cut sequence at the end of the file
				append(append(clone(pre), r[1:]...), "bcd"...),        // continuation bytes only
			)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "\n", "é", "€", "😀", "\xff", "\xe2\x82", "\x80"}
	for range 20 {
		var b strings.Builder
		for b.Len() < 2*chunk+rng.IntN(chunk) {
			if rng.IntN(1000) == 0 {
				b.WriteString(alphabet[5+rng.IntN(3)])
			} else {
				b.WriteString(alphabet[rng.IntN(5)])
			}
		}
		cases = append(cases, []byte(b.String()))
	}
	for i, data := range cases {
		c, got := scanFile(t, data)
		assert.Equal(t, utf8.Valid(data), c.UTF8(), "case %d", i)
		assert.Equal(t, int64(len(data)), c.Size(), "case %d", i)
		assert.True(t, bytes.Equal(data, got), "case %d: Copy sent other bytes", i)
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// A file that changes between Scan and Copy: Copy never sends more than
// Scan counted, and sends less if the file shrank.
func TestCopyAfterChange(t *testing.T) {
	for _, size := range []int{10, 3 * chunk} { // kept from Scan, and read again
		p := filepath.Join(t.TempDir(), "f")
		orig := bytes.Repeat([]byte("x"), size)
		require.NoError(t, os.WriteFile(p, orig, 0o644))
		copyAfter := func(change func()) []byte {
			require.NoError(t, os.WriteFile(p, orig, 0o644))
			c, err := Scan(t.Context(), p, nil)
			require.NoError(t, err)
			defer c.Close()
			change()
			var out bytes.Buffer
			require.NoError(t, c.Copy(t.Context(), &out))
			return out.Bytes()
		}
		grown := copyAfter(func() {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte("more"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		})
		assert.Equal(t, orig, grown, "size %d, grown", size)
		shrunk := copyAfter(func() { require.NoError(t, os.Truncate(p, 5)) })
		if size <= chunk {
			assert.Equal(t, orig, shrunk, "size %d: sent as scanned", size)
		} else {
			assert.Equal(t, orig[:5], shrunk, "size %d, shrunk", size)
		}
	}
}
