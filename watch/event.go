// Package watch reports the changes under a directory as numbered events:
// inotify through fsnotify, with its traps handled (new directories are
// watched at once and what they already hold reported, renames paired,
// the kernel's and the agent's drops said as overflow), events of one path
// coalesced, and a Manager that bounds the watches and the directories
// they hold and keeps watches for clients that poll. It knows nothing of
// HTTP.
package watch

import (
	"encoding/json"
	"strconv"
)

// Event types.
const (
	TypeChange   = "change"
	TypeOverflow = "overflow"
)

// Ops of a change.
const (
	OpCreate = "create"
	OpWrite  = "write"
	OpRemove = "remove"
	OpRename = "rename"
	OpChmod  = "chmod"
)

// Event is one event of a watch. ID numbers the watch's events from 1.
// A change has Path, Op, IsDir and, for a rename, OldPath; an overflow
// has Dropped, the number of events lost (at least 1 when the kernel
// dropped them, as it does not say how many), and Reason.
type Event struct {
	ID      uint64
	Type    string
	Path    string
	Op      string
	IsDir   bool
	OldPath string
	Dropped uint64
	Reason  string
}

type changeData struct {
	Path    string `json:"path"`
	Op      string `json:"op"`
	IsDir   bool   `json:"is_dir"`
	OldPath string `json:"old_path,omitempty"`
}

type overflowData struct {
	Dropped uint64 `json:"dropped"`
	Reason  string `json:"reason,omitempty"`
}

// Data returns the event's data as the wire carries it: for a change
// {"path","op","is_dir","old_path"?}, for an overflow {"dropped","reason"}.
func (e Event) Data() any {
	if e.Type == TypeOverflow {
		return overflowData{Dropped: e.Dropped, Reason: e.Reason}
	}
	return changeData{Path: e.Path, Op: e.Op, IsDir: e.IsDir, OldPath: e.OldPath}
}

// AppendData appends the event's data as one line of JSON.
func (e Event) AppendData(b []byte) []byte {
	data, _ := json.Marshal(e.Data()) // plain strings, bools and numbers: it cannot fail
	return append(b, data...)
}

func itoa(n int) string { return strconv.Itoa(n) }
