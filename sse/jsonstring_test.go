package sse

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeInPieces writes data to a new JSONString in pieces cut at the given
// offsets and returns what reached w.
func writeInPieces(t testing.TB, data []byte, cuts []int) []byte {
	var out bytes.Buffer
	j := NewJSONString(&out)
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(data))
		n, err := j.Write(data[prev:c])
		require.NoError(t, err)
		require.Equal(t, c-prev, n)
		prev = c
	}
	_, err := j.Write(data[prev:])
	require.NoError(t, err)
	require.NoError(t, j.Close())
	return out.Bytes()
}

// Whatever the pieces, the string is escaped exactly as a whole one:
// sequences cut between Writes are joined, invalid bytes become U+FFFD.
func TestJSONStringPiecesEqualWhole(t *testing.T) {
	alphabet := [][]byte{[]byte("a"), []byte("\x00"), []byte("\""), []byte("\\"), []byte("\n"),
		[]byte("é"), []byte("€"), []byte("😀"), []byte("\u2028"), {0xff}, {0xe2, 0x82}, {0x80}, []byte("<&>")}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var data []byte
		for range rng.IntN(40) {
			data = append(data, alphabet[rng.IntN(len(alphabet))]...)
		}
		cuts := make([]int, rng.IntN(6))
		for i := range cuts {
			cuts[i] = rng.IntN(len(data) + 1)
		}
		slices.Sort(cuts)
		want := AppendJSONString(nil, data)
		got := writeInPieces(t, data, cuts)
		if !bytes.Equal(want, got) {
			t.Fatalf("data %q cut at %v:\nwant %s\ngot  %s", data, cuts, want, got)
		}
	}
}

// maxWrite records the largest single Write it receives.
type maxWrite struct{ max, total int }

func (m *maxWrite) Write(p []byte) (int, error) {
	m.max = max(m.max, len(p))
	m.total += len(p)
	return len(p), nil
}

// 8 MiB of NUL bytes escape to 48 MiB; JSONString hands them on in pieces
// of bounded size instead of building the whole string.
func TestJSONStringBoundedBuffer(t *testing.T) {
	var w maxWrite
	j := NewJSONString(&w)
	_, err := j.Write(make([]byte, 8<<20))
	require.NoError(t, err)
	require.NoError(t, j.Close())
	assert.Equal(t, 6*(8<<20)+2, w.total)
	assert.LessOrEqual(t, w.max, jsonFlushAt+6*jsonPiece)
}

func FuzzJSONStringPieces(f *testing.F) {
	f.Add([]byte("héllo \x00 wörld"), uint8(3), uint8(7))
	f.Add([]byte{0xe2, 0x82, 0xac, 0xf0, 0x9f}, uint8(1), uint8(4))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		cuts := []int{int(a) % (len(data) + 1), int(b) % (len(data) + 1)}
		slices.Sort(cuts)
		want := AppendJSONString(nil, data)
		if got := writeInPieces(t, data, cuts); !bytes.Equal(want, got) {
			t.Fatalf("cut at %v: want %s, got %s", cuts, want, got)
		}
	})
}
