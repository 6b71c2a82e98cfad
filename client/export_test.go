package client

// SetStdinID sets x's side channel id, for a test to play an agent that
// refuses it.
func SetStdinID(x *ExecConn, id string) { x.stdinID = id }
