// Package logfield holds the formats of log fields that several packages
// write, so that their log lines read alike.
package logfield

import "time"

// DurationMS returns d in milliseconds, to the microsecond, for the
// duration_ms field of log lines.
func DurationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
