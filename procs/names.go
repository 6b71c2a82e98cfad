package procs

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidName is returned by StartWith for a StartOptions.Name
	// that is not 1 to 64 of A-Z a-z 0-9 . _ -.
	ErrInvalidName = errors.New("a process name is 1 to 64 characters of A-Z a-z 0-9 . _ -")
	// ErrNameTaken is returned by StartWith for a name that a process
	// running (or waiting to restart) has; the error text names it.
	ErrNameTaken = errors.New("process name is taken by a running process")
)

// ValidName reports whether name can name a process.
func ValidName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// claimNameLocked checks that name may be given to a new process: free,
// or the name of one that has ended. r.mu must be held.
func (r *Registry) claimNameLocked(name string) error {
	if name == "" {
		return nil
	}
	if !ValidName(name) {
		return ErrInvalidName
	}
	if old, ok := r.names[name]; ok {
		select {
		case <-old.done:
		default:
			return fmt.Errorf("%w: %s", ErrNameTaken, name)
		}
	}
	return nil
}

// forgetNameLocked drops p's name once p is forgotten, unless a newer
// process has it. r.mu must be held.
func (r *Registry) forgetNameLocked(p *Process) {
	if p.Name != "" && r.names[p.Name] == p {
		delete(r.names, p.Name)
	}
}
