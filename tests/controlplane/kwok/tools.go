//go:build tools

// Package tools pins the KWOK controller command that build.sh compiles with
// `go build sigs.k8s.io/kwok/cmd/kwok` from this module.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
