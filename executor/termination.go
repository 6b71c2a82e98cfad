package executor

// Termination says why a command ended, as replies that opt into it
// report it: {"reason": "exit"} for its own exit, {"reason": "signal",
// "signal": "SIGSEGV"} for a signal nobody here sent, and so on.
type Termination struct {
	Reason string `json:"reason"`           // one of the Reason... constants
	Signal string `json:"signal,omitempty"` // the signal's name ("SIGTERM"), where one ended it
}

// The reasons of a Termination.
const (
	ReasonExit       = "exit"        // the command exited by itself
	ReasonSignal     = "signal"      // a signal the agent did not send
	ReasonTimeout    = "timeout"     // the agent's timer
	ReasonKilled     = "killed"      // a signal sent through the API (kill_process, an exec stream's signal)
	ReasonClientGone = "client_gone" // the request that owned it left
)
