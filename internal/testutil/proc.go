// Package testutil holds helpers that several packages' tests share.
package testutil

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Alive reports whether process pid exists and is not a zombie. A killed
// process may stay a zombie until its new parent reaps it; for the
// questions tests ask ("did the kill reach it?") a zombie is dead.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) && syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}
