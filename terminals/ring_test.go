package terminals

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The ring against a model: the last max bytes of everything written,
// whatever the sizes of the writes and however the buffer grew.
func TestRing(t *testing.T) {
	for _, limit := range []int{1, 7, minRingAlloc, 3*minRingAlloc + 5} {
		r := newRing(limit)
		var all []byte
		sizes := []int{0, 1, 3, limit - 1, limit, limit + 1, 2*limit + 3, 5, minRingAlloc + 1, 17}
		for i, size := range sizes {
			p := make([]byte, size)
			for j := range p {
				p[j] = byte(len(all) + j)
			}
			all = append(all, p...)
			r.write(p)

			assert.Equal(t, uint64(len(all)), r.end, "limit %d, write %d", limit, i)
			kept := all[max(0, len(all)-limit):]
			assert.Equal(t, uint64(len(all)-len(kept)), r.oldest(), "limit %d, write %d", limit, i)
			assert.LessOrEqual(t, r.footprint(), limit)
			// Read from every kept offset, in pieces of every size.
			for _, piece := range []int{1, 2, limit} {
				var got []byte
				dst := make([]byte, piece)
				for o := r.oldest(); o < r.end; {
					n := r.readAt(dst, o)
					if !assert.Positive(t, n) {
						break
					}
					got = append(got, dst[:n]...)
					o += uint64(n)
				}
				assert.True(t, bytes.Equal(kept, got), "limit %d, write %d, pieces of %d", limit, i, piece)
			}
		}
	}
}

func TestRingRelease(t *testing.T) {
	r := newRing(100)
	r.write([]byte("hello"))
	r.release()
	assert.Equal(t, uint64(5), r.end, "offsets go on")
	assert.Equal(t, uint64(5), r.oldest(), "nothing kept")
	assert.Equal(t, 0, r.footprint())
	assert.Equal(t, 0, r.readAt(make([]byte, 10), 5))
}

// A quiet terminal costs little: the buffer grows with what it holds.
func TestRingGrowsLazily(t *testing.T) {
	r := newRing(1 << 20)
	assert.Equal(t, 0, r.footprint())
	r.write([]byte("$ "))
	assert.Equal(t, minRingAlloc, r.footprint())
	r.write(make([]byte, 100<<10))
	assert.Less(t, r.footprint(), 256<<10)
	r.write(make([]byte, 2<<20))
	assert.Equal(t, 1<<20, r.footprint())
}
