package finished

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type item struct {
	name  string
	bytes int
}

// The oldest lose their output first but never the newest, and past the
// count the oldest are forgotten.
func TestAdd(t *testing.T) {
	var l List[*item]
	b := Bounds[*item]{MaxItems: 3, MaxBytes: 25,
		Bytes: func(i *item) int { return i.bytes }, Release: func(i *item) { i.bytes = 0 }}
	a, c, d, e := &item{"a", 10}, &item{"c", 10}, &item{"d", 10}, &item{"e", 30}
	assert.Empty(t, l.Add(a, b))
	assert.Empty(t, l.Add(c, b))
	assert.Empty(t, l.Add(d, b), "30 bytes: the oldest loses its output")
	assert.Equal(t, 0, a.bytes)
	assert.Equal(t, 10, c.bytes)
	assert.Equal(t, []*item{a}, l.Add(e, b), "a fourth: the first is forgotten")
	assert.Equal(t, 0, c.bytes)
	assert.Equal(t, 0, d.bytes)
	assert.Equal(t, 30, e.bytes, "the newest keeps its output, even alone over the bound")
	assert.Equal(t, 3, l.Len())
	last, ok := l.Last()
	assert.True(t, ok)
	assert.Equal(t, e, last)
}

func TestRemove(t *testing.T) {
	var l List[*item]
	a, b := &item{name: "a"}, &item{name: "b"}
	bounds := Bounds[*item]{MaxItems: 10, MaxBytes: 100, Bytes: func(*item) int { return 0 }, Release: func(*item) {}}
	l.Add(a, bounds)
	l.Add(b, bounds)
	assert.True(t, l.Remove(a))
	assert.False(t, l.Remove(a))
	assert.Equal(t, 1, l.Len())
	last, _ := l.Last()
	assert.Equal(t, b, last)
}
