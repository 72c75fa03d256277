//go:build tools

// Package tools pins the oras CLI that build.sh compiles with
// `go build oras.land/oras/cmd/oras` from this module: a registry client
// Dragon did not write, to check that policies pushed by either side are
// read by the other.
package tools

import (
	_ "oras.land/oras/cmd/oras"
)
