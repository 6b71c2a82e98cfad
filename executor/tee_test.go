package executor

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartTeeIsByteExact checks that the raw bytes are exactly what the
// command wrote (CR, CRLF, no final newline, lines past MaxLine), while the
// lines still come as lines.
func TestStartTeeIsByteExact(t *testing.T) {
	r := Runner{MaxLine: 10}
	var mu sync.Mutex
	var raw [3]bytes.Buffer
	var lines int
	p, err := r.StartTee(context.Background(),
		Command{Cmd: `printf 'a\r\nb\rc\n0123456789abcdefghij\n'; printf 'err' >&2; printf 'no newline'`},
		func(s Stream, _ time.Time, ls [][]byte) { mu.Lock(); lines += len(ls); mu.Unlock() },
		func(s Stream, _ time.Time, b []byte) { mu.Lock(); raw[s].Write(b); mu.Unlock() })
	require.NoError(t, err)
	p.Wait()
	assert.Equal(t, "a\r\nb\rc\n0123456789abcdefghij\nno newline", raw[Stdout].String())
	assert.Equal(t, "err", raw[Stderr].String())
	assert.Equal(t, 6, lines) // a; b\rc; the long line in two pieces; no newline; err
}
