package search

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// position is where a walk resumes: after line `line` of the file at rel
// (line 0: the whole file, or the directory, is still to be looked at;
// for find_files the entry at rel was the last one returned).
type position = *cursorPos

type cursorPos struct {
	rel  []string
	line int
}

// cursorWire is a cursor's content; the string a client holds is its JSON
// in base64 (URL alphabet, no padding), opaque to it.
type cursorWire struct {
	Path string `json:"p"`
	Line int    `json:"l"`
}

func encodeCursor(rel []string, line int) string {
	b, _ := json.Marshal(cursorWire{Path: strings.Join(rel, "/"), Line: line}) // a struct of a string and an int
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (position, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c cursorWire
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Path == "" || c.Line < 0 {
		return nil, invalid("bad cursor")
	}
	return &cursorPos{rel: strings.Split(c.Path, "/"), line: c.Line}, nil
}
