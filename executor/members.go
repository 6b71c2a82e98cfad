package executor

import (
	"errors"
	"syscall"
)

// hasLiveMembers reports whether process group pgid has a member that is
// not a zombie. kill(-pgid, 0) answers for zombies too: a grandchild
// killed a moment ago stays in its group until whoever inherited it reaps
// it, which may take a while, or forever under an init that never reaps.
// So when the group answers, /proc says whether anyone in it is alive;
// where /proc is not this PID namespace's (a container without its own
// /proc mount), kill's answer stands.
func hasLiveMembers(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	alive, ok := procGroupAlive(pgid)
	return alive || !ok
}

// procGroupAlive reports whether a process that is not a zombie has
// process group pgid, by reading /proc; ok is false if /proc cannot tell.
func procGroupAlive(pgid int) (alive, ok bool) {
	if !procIsOurs() {
		return false, false
	}
	ok = liveProcs(func(s procStat) bool {
		alive = s.pgrp == pgid
		return !alive
	})
	return alive, ok
}
