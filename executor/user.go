package executor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"
)

// ErrUnknownUser is returned by LookupUser for a user the system's user
// database does not know.
var ErrUnknownUser = errors.New("unknown user")

// User is an account a command can run as (Command.User).
type User struct {
	Name   string   // login name, from the passwd entry
	UID    uint32   // user id
	GID    uint32   // primary group
	Groups []uint32 // supplementary groups, from /etc/group; the primary one included
	Home   string   // home directory, from the passwd entry
}

// Env returns the variables a login sets from u's passwd entry: HOME,
// USER and LOGNAME.
func (u *User) Env() map[string]string {
	return map[string]string{"HOME": u.Home, "USER": u.Name, "LOGNAME": u.Name}
}

// LookupUser returns the user spec names: a login name, or a numeric uid
// (a name made of digits is tried as a uid first). It reads the system's
// user database with os/user, which without cgo parses /etc/passwd and
// /etc/group. It returns ErrNotPrivileged if r may not run commands as
// another user at all, which it checks first; an error wrapping
// ErrUnknownUser if there is no such user.
func (r *Runner) LookupUser(spec string) (*User, error) {
	if !r.privileged() {
		return nil, ErrNotPrivileged
	}
	var u *user.User
	var err error
	if _, numErr := strconv.ParseUint(spec, 10, 32); numErr == nil {
		u, err = user.LookupId(spec)
		if err != nil {
			u, err = user.Lookup(spec)
		}
	} else {
		u, err = user.Lookup(spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownUser, spec)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: %q has no numeric uid and gid", ErrUnknownUser, spec)
	}
	out := &User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		// No /etc/group, or no entry: the primary group alone.
		ids = []string{u.Gid}
	}
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil && !slices.Contains(out.Groups, uint32(g)) {
			out.Groups = append(out.Groups, uint32(g))
		}
	}
	return out, nil
}

// privileged reports whether commands may run as another user.
func (r *Runner) privileged() bool {
	if r.Privileged != nil {
		return r.Privileged()
	}
	return os.Geteuid() == 0
}

// check is Check, and also refuses a Command.User that r may not switch
// to and Limits that r cannot apply.
func (r *Runner) check(c Command) error {
	if c.User != nil && !r.privileged() {
		return ErrNotPrivileged
	}
	if err := r.CheckLimits(c.Limits); err != nil {
		return err
	}
	return Check(c)
}

// credential returns the credential the command's process takes: nil,
// the agent's own, unless c.User is set.
func (c Command) credential() *syscall.Credential {
	if c.User == nil {
		return nil
	}
	return &syscall.Credential{Uid: c.User.UID, Gid: c.User.GID, Groups: c.User.Groups}
}
