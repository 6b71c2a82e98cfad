package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An unstamped binary reports the module version the go command recorded
// (go install ...@v0.1.0), spelled as the VERSION file spells it, and dev
// when there is none.
func TestModuleVersion(t *testing.T) {
	assert.Equal(t, "0.1.0", moduleVersion("v0.1.0", "dev"))
	assert.Equal(t, "0.1.1-0.20260101000000-abcdef012345+dirty", moduleVersion("v0.1.1-0.20260101000000-abcdef012345+dirty", "dev"))
	assert.Equal(t, "dev", moduleVersion("(devel)", "dev"))
	assert.Equal(t, "dev", moduleVersion("", "dev"))
}
