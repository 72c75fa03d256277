//go:build tools

// Package tools pins the CNCF Distribution registry command that build.sh
// compiles with `go build github.com/distribution/distribution/v3/cmd/registry`
// from this module: the OCI registry the policy-distribution tests push to
// and pull from on 127.0.0.1.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
