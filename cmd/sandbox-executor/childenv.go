package main

import "strings"

// isCredentialEnv reports whether name is one of the agent's own
// configuration variables that carries a credential: the bearer secret,
// and where pool mode keeps it. The agent reads them at start-up; no
// child (a command, a process, a terminal, a session's command, the main
// command) ever gets them, whatever user it runs as. A child that could
// read the secret could call the API, which runs commands as root; an
// app behind a public preview that shows its environment would hand the
// secret to anyone.
//
// The other variables the agent reads are not credentials, and children
// keep them: apps read PORT and LOG_LEVEL, and a command may want to know
// the API's port (SANDBOX_PORT). TestEveryConfigVariableIsClassified makes
// a new variable choose a side.
func isCredentialEnv(name string) bool {
	switch name {
	case "SANDBOX_SECRET", "SANDBOX_SECRET_PATH":
		return true
	}
	return false
}

// childEnviron returns environ, "NAME=value" entries, without the agent's
// credential variables (see isCredentialEnv). The result is a new slice;
// environ is not modified.
func childEnviron(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !isCredentialEnv(name) {
			env = append(env, kv)
		}
	}
	return env
}
