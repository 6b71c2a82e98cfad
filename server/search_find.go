package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sandbox-executor/sandbox-executor/search"
	"github.com/sandbox-executor/sandbox-executor/sse"
)

// findWriter writes a find_files reply while the walk goes: the same
// JSON object encode would write of the whole search.FindReply, with
// "entries" first, one entry at a time, and the rest of the reply
// (truncated, stopped_by, cursor, skipped) once the walk has ended. An
// entry is appended by hand rather than by encoding/json: a reply of ten
// thousand entries is most of the work of a find_files. A client that
// accepts nothing for the stall timeout counts as gone (stallWriter).
type findWriter struct {
	w       http.ResponseWriter
	stall   *stallWriter
	bw      *bufio.Writer
	buf     []byte // one entry's JSON, reused
	started bool   // the status and the start of the object are written
}

func newFindWriter(w http.ResponseWriter, stall time.Duration) *findWriter {
	sw := newStallWriter(w, stall)
	return &findWriter{w: w, stall: sw, bw: bufio.NewWriterSize(sw, 32<<10)}
}

// findHead is how the reply starts; an entry before the first is
// separated by a comma.
const findHead = `{"entries":[`

// entry writes e; the first also sends the status and headers.
func (f *findWriter) entry(e search.FoundEntry) error {
	b := f.buf[:0]
	if !f.started {
		f.start()
	} else {
		b = append(b, ',')
	}
	b = append(b, `{"path":`...)
	b = appendJSONString(b, e.Path)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, `,"mod_time":`...)
	b = appendJSONString(b, e.ModTime)
	b = append(b, '}')
	f.buf = b
	_, err := f.bw.Write(b)
	return err
}

func (f *findWriter) start() {
	f.w.Header().Set("Content-Type", "application/json")
	f.w.WriteHeader(http.StatusOK)
	f.started = true
	f.bw.WriteString(findHead)
}

// finish writes the rest of the reply (rep without its entries, which
// were written) and flushes it.
func (f *findWriter) finish(rep *search.FindReply) error {
	if !f.started {
		f.start()
	}
	rest := *rep
	rest.Entries = []search.FoundEntry{}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as encode
	if err := enc.Encode(&rest); err != nil {
		return err
	}
	// rest's JSON starts with its empty entries: what follows them is
	// the rest of the object, and the newline encode ends a reply with.
	tail, ok := bytes.CutPrefix(b.Bytes(), []byte(findHead+"]"))
	if !ok {
		return errors.New("find_files: the reply does not start with its entries")
	}
	f.bw.WriteByte(']')
	f.bw.Write(tail)
	return f.bw.Flush()
}

// appendJSONString appends s as a JSON string, as sse.AppendJSONString
// does; a string of printable ASCII without quotes or backslashes (most
// paths) is copied as it is, without the conversion to bytes.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return sse.AppendJSONString(b, []byte(s))
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
