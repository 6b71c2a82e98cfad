//go:build tools

// Package deps pins the libraries that branches under way will import
// (terminals, tunnels, the OpenAPI check, metrics), so that go mod tidy
// keeps them until the code that uses them lands. It is removed then.
package deps

import (
	_ "github.com/coder/websocket"
	_ "github.com/creack/pty"
	_ "github.com/getkin/kin-openapi/openapi3filter"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/common/expfmt"
	_ "golang.org/x/sys/unix"
)
