package main

import (
	"runtime/debug"
	"strings"
)

// version is reported by -version and /health. The Makefile and the
// Dockerfile stamp it from the VERSION file:
// go build -ldflags "-X main.version=0.1.0". It is a variable, the one at
// package level, because the linker can set only variables.
var version = "dev"

// init gives a binary that was not stamped the version the go command
// recorded, if any: that of the module for
// `go install github.com/sandbox-executor/sandbox-executor/cmd/sandbox-executor@v0.1.0`,
// or a pseudo-version from the VCS in a checkout (unless -buildvcs=false),
// without the tag's "v": the version is spelled one way everywhere, as
// the VERSION file, the release binaries and the image tags spell it
// (0.1.0). Nothing else assigns version.
func init() {
	if version != "dev" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = moduleVersion(bi.Main.Version, version)
	}
}

// moduleVersion returns v, the main module's version in the build
// information, without its leading "v", unless the go command recorded
// none: then fallback.
func moduleVersion(v, fallback string) string {
	if v == "" || v == "(devel)" {
		return fallback
	}
	return strings.TrimPrefix(v, "v")
}
