package files

// Owner is the account a request writes files for: what the request
// creates is owned by it, and the permission checks made on its way are
// its own. A nil *Owner means the agent's own account, with its rights.
type Owner struct {
	UID    uint32   // user id
	GID    uint32   // primary group
	Groups []uint32 // supplementary groups; the primary one included
}
