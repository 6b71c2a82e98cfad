package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
)

// A chunked body cannot be spliced whole: its data comes in chunks, each
// after a line giving its size. An exec's stdin side channel, whose
// length a client streaming a pipe does not know, is read as chunkedBody
// from the hijacked connection: the framing through the connection's
// buffered reader, the data spliced from the socket (what the reader had
// already buffered, at most its 4 KiB, is copied). The client's chunks are
// what it read at a time, so large ones are spliced nearly whole.

// errChunked is the error of a body whose chunked framing is broken.
var errChunked = errors.New("malformed chunked request body")

// chunkedBody reads a chunked request body from a hijacked connection: br
// is the connection's buffered reader, sock the socket under it.
type chunkedBody struct {
	br      *bufio.Reader
	sock    net.Conn
	left    int64 // data left in the current chunk
	started bool  // a chunk was read: the next header follows its CRLF
	eof     bool  // the last chunk and the trailer were read
}

// next reads the next chunk's header (after the CRLF that ends the chunk
// before), or the last chunk's trailer.
func (c *chunkedBody) next() error {
	if c.started {
		if err := c.expectCRLF(); err != nil {
			return err
		}
	}
	c.started = true
	line, err := c.line()
	if err != nil {
		return err
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i] // chunk extensions are allowed, and ignored
	}
	size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
	if err != nil || size < 0 {
		return errChunked
	}
	if size > 0 {
		c.left = size
		return nil
	}
	for { // the trailer: header lines, then an empty one
		line, err := c.line()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			c.eof = true
			return nil
		}
	}
}

// line reads one CRLF-ended line of the framing, without its end; a line
// longer than the reader's buffer (4 KiB) is an error.
func (c *chunkedBody) line() ([]byte, error) {
	b, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errChunked
		}
		return nil, noEOF(err)
	}
	return bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r")), nil
}

func (c *chunkedBody) expectCRLF() error {
	b, err := c.line()
	if err != nil {
		return err
	}
	if len(b) != 0 {
		return errChunked
	}
	return nil
}

// noEOF makes an end of the connection inside the body an unexpected one.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteTo writes the body's data to w: what br has buffered through it,
// the rest from the socket through w's ReadFrom, which a stdin pipe's
// writer implements with splice(2).
func (c *chunkedBody) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if c.left == 0 {
			if c.eof {
				return total, nil
			}
			if err := c.next(); err != nil {
				return total, err
			}
			continue
		}
		var n int64
		var err error
		if b := c.br.Buffered(); b > 0 {
			n, err = io.CopyN(w, c.br, min(int64(b), c.left))
		} else {
			lr := &io.LimitedReader{R: c.sock, N: c.left}
			if rf, ok := w.(io.ReaderFrom); ok {
				n, err = rf.ReadFrom(lr)
			} else {
				n, err = io.Copy(w, lr)
			}
			if err == nil && lr.N > 0 {
				err = io.ErrUnexpectedEOF
			}
		}
		total += n
		c.left -= n
		if err != nil {
			return total, noEOF(err)
		}
	}
}

// Read reads the body's data through br, copied: for what is read of a
// body that is not written anywhere (connlimit.Linger's drain).
func (c *chunkedBody) Read(p []byte) (int, error) {
	for c.left == 0 {
		if c.eof {
			return 0, io.EOF
		}
		if err := c.next(); err != nil {
			return 0, err
		}
	}
	n, err := c.br.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	return n, noEOF(err)
}
