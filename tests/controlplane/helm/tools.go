//go:build tools

// Package tools pins the helm CLI that build.sh compiles with
// `go build helm.sh/helm/v4/cmd/helm` from this module: the tool operators
// install dragon-scheduler's chart with, to render and install the chart
// against the test control plane.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
