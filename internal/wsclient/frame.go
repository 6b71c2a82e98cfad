package wsclient

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
)

// Opcodes of RFC 6455 section 5.2.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// Close codes of RFC 6455 section 7.4.1 that this package sends or reads.
const (
	closeNormal      = 1000
	closeGoingAway   = 1001
	closeProtocol    = 1002
	closeUnsupported = 1003
	closeNoStatus    = 1005 // never on the wire: a close frame without a code
)

const (
	// maxHeader is the longest frame header: 2 bytes, an 8-byte length
	// and a 4-byte mask key.
	maxHeader = 14
	// maxControl is the longest payload of a control frame.
	maxControl = 125
	// keystreamSize is the length of the repeated mask key that mask XORs
	// against, a multiple of 4 so that each block starts on the key's
	// first byte.
	keystreamSize = 4096
)

// ErrProtocol is wrapped by Read's error for a frame the server must not
// send (or a text message, which a tunnel does not carry); Read then
// fails for good, and the client sends a close frame with 1002 (1003 for
// text).
var ErrProtocol = errors.New("websocket protocol error")

// header is a frame header, as the server sent it.
type header struct {
	fin    bool
	opcode byte
	length int64
}

// isControl reports whether op is a control opcode (close, ping, pong).
func isControl(op byte) bool { return op&0x8 != 0 }

// parseHeader parses the header at the start of b. It returns the header
// and its length in bytes, or need > len(b) when b is too short to hold
// it, or an error wrapping ErrProtocol for a header no server may send:
// a masked frame, reserved bits or opcodes, a fragmented or long control
// frame, a length of 2^63 or more.
func parseHeader(b []byte) (h header, size, need int, err error) {
	if len(b) < 2 {
		return h, 0, 2, nil
	}
	h.fin = b[0]&0x80 != 0
	h.opcode = b[0] & 0x0F
	if b[0]&0x70 != 0 {
		return h, 0, 0, fmt.Errorf("%w: reserved bits set (no extension was negotiated)", ErrProtocol)
	}
	if b[1]&0x80 != 0 {
		return h, 0, 0, fmt.Errorf("%w: the server masked a frame", ErrProtocol)
	}
	size = 2
	switch l := b[1] & 0x7F; l {
	case 126:
		size += 2
	case 127:
		size += 8
	default:
		h.length = int64(l)
	}
	if len(b) < size {
		return h, 0, size, nil
	}
	switch size {
	case 4:
		h.length = int64(binary.BigEndian.Uint16(b[2:]))
	case 10:
		l := binary.BigEndian.Uint64(b[2:])
		if l>>63 != 0 {
			return h, 0, 0, fmt.Errorf("%w: frame length %d", ErrProtocol, l)
		}
		h.length = int64(l)
	}
	switch {
	case h.opcode > opBinary && h.opcode < opClose, h.opcode > opPong:
		return h, 0, 0, fmt.Errorf("%w: reserved opcode %#x", ErrProtocol, h.opcode)
	case isControl(h.opcode) && !h.fin:
		return h, 0, 0, fmt.Errorf("%w: a fragmented control frame", ErrProtocol)
	case isControl(h.opcode) && h.length > maxControl:
		return h, 0, 0, fmt.Errorf("%w: a control frame of %d bytes", ErrProtocol, h.length)
	}
	return h, size, size, nil
}

// putHeader writes the header of a final, masked frame of opcode with a
// payload of n bytes to the end of b (which holds maxHeader bytes), and
// returns its length: the header is b[maxHeader-len:].
func putHeader(b *[maxHeader]byte, opcode byte, n int, key uint32) int {
	binary.BigEndian.PutUint32(b[maxHeader-4:], key)
	var size int
	switch {
	case n <= 125:
		size = 2 + 4
		b[maxHeader-5] = 0x80 | byte(n)
	case n <= 0xFFFF:
		size = 4 + 4
		binary.BigEndian.PutUint16(b[maxHeader-6:], uint16(n))
		b[maxHeader-7] = 0x80 | 126
	default:
		size = 10 + 4
		binary.BigEndian.PutUint64(b[maxHeader-12:], uint64(n))
		b[maxHeader-13] = 0x80 | 127
	}
	b[maxHeader-size] = 0x80 | opcode
	return size
}

// mask writes src XORed with key, repeated from its first byte, to dst,
// the way a client masks a payload (RFC 6455 section 5.3). dst is at least
// as long as src and may be src itself. ks is scratch space that mask
// fills with the repeated key.
func mask(dst, src []byte, key uint32, ks *[keystreamSize]byte) {
	n := min(len(src), keystreamSize)
	for i := 0; i < n; i += 4 {
		binary.BigEndian.PutUint32(ks[i:], key)
	}
	for len(src) > 0 {
		m := min(len(src), keystreamSize)
		subtle.XORBytes(dst[:m], src[:m], ks[:m])
		dst, src = dst[m:], src[m:]
	}
}
