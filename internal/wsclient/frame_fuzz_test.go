package wsclient

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzParseHeader compares parseHeader with a plain reading of RFC 6455
// section 5.2 written for the test, on whatever bytes it is given, and
// checks that a header cut anywhere asks for more bytes rather than
// failing or succeeding early.
func FuzzParseHeader(f *testing.F) {
	for _, seed := range [][]byte{
		{0x82, 0x05}, {0x81, 0x7E, 0x01, 0x00}, {0x82, 0x7F, 0, 0, 0, 1, 0, 0, 0, 0},
		{0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0}, {0x88, 0x02, 0x03, 0xE8}, {0x09, 0x00},
		{0x89, 0x7E, 0x00, 0x7E}, {0x83, 0x00}, {0xC2, 0x00}, {0x82, 0x85, 1, 2, 3, 4}, {0x00}, {},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, size, need, err := parseHeader(b)
		want, wantSize, wantErr := referenceHeader(b)
		switch {
		case wantErr != nil:
			if err == nil || !errors.Is(err, ErrProtocol) {
				t.Fatalf("%x: err %v, want one wrapping ErrProtocol (%v)", b, err, wantErr)
			}
		case wantSize > len(b):
			if err != nil || size != 0 || need != wantSize {
				t.Fatalf("%x: size %d, need %d, err %v; want need %d", b, size, need, err, wantSize)
			}
		default:
			if err != nil || size != wantSize || need != wantSize || h != want {
				t.Fatalf("%x: %+v, size %d, need %d, err %v; want %+v, size %d", b, h, size, need, err, want, wantSize)
			}
			for k := range size {
				if _, s, n, err := parseHeader(b[:k]); err != nil || s != 0 || n <= k {
					t.Fatalf("%x cut at %d: size %d, need %d, err %v", b, k, s, n, err)
				}
			}
		}
	})
}

// referenceHeader reads a frame header a server sent, the spec's way:
// it returns the header and its length (which may exceed len(b): more
// bytes are needed), or an error for a header a client must refuse.
func referenceHeader(b []byte) (header, int, error) {
	if len(b) < 2 {
		return header{}, 2, nil
	}
	h := header{fin: b[0]>>7 == 1, opcode: b[0] & 0x0F}
	rsv, masked, l := (b[0]>>4)&0x7, b[1]>>7 == 1, int(b[1]&0x7F)
	if rsv != 0 || masked {
		return h, 0, errors.New("reserved bits or mask")
	}
	size := 2
	switch l {
	case 126:
		size = 4
	case 127:
		size = 10
	}
	if len(b) < size {
		return h, size, nil
	}
	switch l {
	case 126:
		h.length = int64(b[2])<<8 | int64(b[3])
	case 127:
		u := binary.BigEndian.Uint64(b[2:10])
		if u >= 1<<63 {
			return h, 0, errors.New("length with the top bit set")
		}
		h.length = int64(u)
	default:
		h.length = int64(l)
	}
	known := h.opcode == 0 || h.opcode == 1 || h.opcode == 2 || h.opcode == 8 || h.opcode == 9 || h.opcode == 10
	control := h.opcode >= 8
	if !known || (control && (!h.fin || h.length > 125)) {
		return h, 0, errors.New("opcode or control frame")
	}
	return h, size, nil
}
