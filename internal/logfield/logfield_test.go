package logfield

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDurationMS(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{
		{0, 0},
		{999 * time.Nanosecond, 0}, // below the microsecond: cut
		{1500 * time.Microsecond, 1.5},
		{2*time.Second + 3*time.Microsecond, 2000.003},
		{-time.Millisecond, -1},
	} {
		assert.Equal(t, tc.want, DurationMS(tc.d), "%s", tc.d)
	}
}
