package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// chunkedBody reads the chunked framing exactly: extensions ignored,
// trailers skipped, data whole whether it was buffered or on the socket;
// broken framing is an error, never data.
func TestChunkedBody(t *testing.T) {
	for _, tc := range []struct {
		name, wire, want string
		err              bool
	}{
		{name: "chunks", wire: "3\r\nabc\r\n5\r\nde\r\nf\r\n0\r\n\r\n", want: "abcde\r\nf"},
		{name: "extension and trailer", wire: "4;x=y\r\n\x00\xff\r\n\r\n0\r\nT: v\r\n\r\n", want: "\x00\xff\r\n"},
		{name: "LF only", wire: "2\nhi\n0\n\n", want: "hi"},
		{name: "empty", wire: "0\r\n\r\n", want: ""},
		{name: "bad size", wire: "zz\r\nab\r\n0\r\n\r\n", err: true},
		{name: "no CRLF after data", wire: "2\r\nabX\r\n0\r\n\r\n", want: "ab", err: true},
		{name: "cut short", wire: "5\r\nab", want: "ab", err: true},
		{name: "no end", wire: "2\r\nab\r\n", want: "ab", err: true},
	} {
		for _, buffered := range []int{0, 2, len(tc.wire)} {
			// The first bytes were read ahead by net/http's reader, the
			// rest are still on the socket.
			client, server := net.Pipe()
			go func() {
				_, _ = client.Write([]byte(tc.wire[buffered:]))
				client.Close()
			}()
			br := bufio.NewReaderSize(io.MultiReader(strings.NewReader(tc.wire[:buffered]), server), 16)
			_, _ = br.Peek(min(buffered, 16))
			var got bytes.Buffer
			_, err := (&chunkedBody{br: br, sock: server}).WriteTo(&got)
			server.Close()
			assert.Equal(t, tc.want, got.String(), "%s, %d buffered", tc.name, buffered)
			assert.Equal(t, tc.err, err != nil, "%s, %d buffered: %v", tc.name, buffered, err)
		}
	}
}
