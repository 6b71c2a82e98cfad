package files

import "os"

// Owner is the account a request writes files for: what the request
// creates is owned by it, and the permission checks made on its way are
// its own. A nil *Owner means the agent's own account, with its rights.
type Owner struct {
	UID    uint32   // user id
	GID    uint32   // primary group
	Groups []uint32 // supplementary groups; the primary one included
}

// uid returns the user id writes for o run as: o's, or the agent's own
// for a nil o.
func (o *Owner) uid() int {
	if o == nil {
		return os.Geteuid()
	}
	return int(o.UID)
}
