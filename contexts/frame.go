package contexts

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxFrame caps one frame from a worker: a rich output is cut by the
// worker at Options.MaxOutput, so a frame past this is malformed.
func maxFrame(maxOutput int) int { return maxOutput + 1<<20 }

// errMalformed is a frame a worker could not have sent: too long, not
// JSON, or of an unknown type. The interpreter is then restarted.
var errMalformed = errors.New("malformed frame from the worker")

// frame is one message between the agent and a worker, as JSON after a
// 4-byte big-endian length. Which fields are set depends on Type.
type frame struct {
	Type string `json:"type"` // ready, display, result, error, done; execute to the worker

	// execute; Count is echoed by done
	Code      string `json:"code,omitempty"`
	Count     int    `json:"count,omitempty"`
	MaxOutput int    `json:"max_output,omitempty"`

	// ready
	Pid int `json:"pid,omitempty"`

	// display and result
	Data      map[string]json.RawMessage `json:"data,omitempty"`
	Truncated bool                       `json:"truncated,omitempty"`

	// error
	Name      string   `json:"name,omitempty"`
	Value     string   `json:"value,omitempty"`
	Traceback []string `json:"traceback,omitempty"`

	// done
	Status string `json:"status,omitempty"`

	// Every frame from a worker: the bytes it had written to its stdout
	// and stderr before it, since it started; its events go after them.
	Stdout int64 `json:"stdout,omitempty"`
	Stderr int64 `json:"stderr,omitempty"`
}

// writeFrame writes f to w as one frame.
func writeFrame(w io.Writer, f frame) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	b := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	_, err = w.Write(append(b, body...))
	return err
}

// readFrame reads one frame of at most max bytes from r. It returns
// io.EOF at a clean end between frames, and an error wrapping
// errMalformed for anything a worker could not have sent.
func readFrame(r io.Reader, max int) (frame, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if int64(n) > int64(max) {
		return frame{}, fmt.Errorf("%w: %d bytes (limit %d)", errMalformed, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return frame{}, fmt.Errorf("%w: cut short: %v", errMalformed, err)
	}
	var f frame
	if err := json.Unmarshal(body, &f); err != nil {
		return frame{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	switch f.Type {
	case "ready", "display", "result", "error":
	case "done":
		switch f.Status {
		case "ok", "error", "interrupted":
		default:
			return frame{}, fmt.Errorf("%w: done with status %q", errMalformed, f.Status)
		}
	default:
		return frame{}, fmt.Errorf("%w: type %q", errMalformed, f.Type)
	}
	return f, nil
}
