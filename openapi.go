// Package sandboxexecutor holds what belongs to the repository as a whole
// rather than to one package: the API's contract, openapi.yaml.
package sandboxexecutor

import _ "embed" // for openapi.yaml

//go:embed openapi.yaml
var openAPI string // a string, so that no caller can modify it

// OpenAPI returns the agent's OpenAPI 3.1 document (openapi.yaml at the
// repository root) as YAML. It describes every route the agent serves;
// server's tests keep the two in step.
func OpenAPI() string { return openAPI }
