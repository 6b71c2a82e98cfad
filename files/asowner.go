package files

import (
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// asOwner runs fn with the file-system identity of o: the files and
// directories fn creates are o's, and the kernel checks fn's opens,
// creations, renames and removals with o's rights. A nil o runs fn as it
// is, with the agent's own identity.
//
// The identity is a thread's (setfsuid(2), setfsgid(2) and setgroups(2)
// change only the calling thread), so fn runs on an OS thread of its own
// that is never given back: see ownerThread. A file fn opens may be read
// and written from any goroutine afterwards, since the kernel checks
// rights at the open, not at each read or write.
func asOwner(o *Owner, fn func() error) error {
	if o == nil {
		return fn()
	}
	errc := make(chan error, 1) // one slot: ownerThread never blocks on it
	go ownerThread(o, fn, errc)
	return <-errc
}

// ownerThread runs in its own goroutine; it ends when fn returns. It locks
// its goroutine to its OS thread and never unlocks it, so that the thread,
// whose identity it changes, ends with the goroutine rather than serving
// others (the Go runtime then terminates it). Threads the runtime starts
// meanwhile are not cloned from a locked one, and so never inherit it.
func ownerThread(o *Owner, fn func() error, errc chan<- error) {
	runtime.LockOSThread()
	if err := become(o); err != nil {
		errc <- err
		return
	}
	errc <- fn()
}

// become gives the calling thread o's file-system identity: its groups,
// then its group, then its user (the last, because a thread that is no
// longer root may not change the others).
func become(o *Owner) error {
	groups := o.Groups
	if !slices.Contains(groups, o.GID) {
		groups = append(slices.Clip(groups), o.GID)
	}
	gids := make([]int, len(groups))
	for i, g := range groups {
		gids[i] = int(g)
	}
	// unix.Setgroups is the raw system call, which changes this thread
	// only; syscall.Setgroups would change every thread of the agent.
	if err := unix.Setgroups(gids); err != nil {
		return fmt.Errorf("act as uid %d: setgroups: %w", o.UID, err)
	}
	// setfsgid and setfsuid report no failure: each returns the previous
	// id. Asking again with -1, which changes nothing, tells whether the
	// change took.
	_, _ = unix.SetfsgidRetGid(int(o.GID))
	if g, _ := unix.SetfsgidRetGid(-1); g != int(o.GID) {
		return fmt.Errorf("act as uid %d: setfsgid %d did not take", o.UID, o.GID)
	}
	_, _ = unix.SetfsuidRetUid(int(o.UID))
	if u, _ := unix.SetfsuidRetUid(-1); u != int(o.UID) {
		return fmt.Errorf("act as uid %d: setfsuid did not take", o.UID)
	}
	return nil
}

// AsOwner runs fn with o's file-system identity, as the package's own
// reads and writes run (see asOwner): for a caller that reaches files
// another way, such as through an os.Root. A nil o runs fn as it is. fn
// runs on an OS thread of its own, so it must not hand its work to other
// goroutines: their system calls would be the agent's.
func AsOwner(o *Owner, fn func() error) error { return asOwner(o, fn) }
