package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// lineWindow keeps the lines asked for, across writes that cut lines
// anywhere, and says where to go on.
func TestLineWindow(t *testing.T) {
	long := strings.Repeat("x", maxReadText+10)
	for _, c := range []struct {
		name         string
		text         string
		first, lines int
		want         string
		more, cut    bool
		next, total  int
	}{
		{"all", "a\nb\nc\n", 1, 10, "a\nb\nc\n", false, false, 0, 3},
		{"middle", "a\nb\nc\nd\n", 2, 2, "b\nc\n", true, false, 4, 0},
		{"no final newline", "a\nb", 2, 5, "b", false, false, 0, 2},
		{"past the end", "a\n", 5, 5, "", false, false, 0, 1},
		{"a line over the byte bound", "a\n" + long + "\nz\n", 2, 5, long[:maxReadText], true, true, 3, 0},
		{"cut at a whole line", "a\n" + long + "\n", 1, 5, "a\n", true, true, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, step := range []int{1, 3, 1 << 20} { // how Copy happens to cut the file
				w := lineWindow{first: c.first, lines: c.lines, line: 1}
				var err error
				for s := c.text; s != "" && err == nil; {
					n := min(step, len(s))
					_, err = w.Write([]byte(s[:n]))
					s = s[n:]
				}
				assert.Equal(t, c.want, string(w.out), "step %d", step)
				assert.Equal(t, c.more, w.more, "step %d", step)
				assert.Equal(t, c.cut, w.cut, "step %d", step)
				if c.more {
					assert.Equal(t, c.next, w.next, "step %d", step)
				} else {
					assert.Equal(t, c.total, w.total(), "step %d", step)
				}
			}
		})
	}
}
